"""Files written whole or not at all, and ``.pt`` files read without running code (imports only :mod:`elmoc.errors`)."""
