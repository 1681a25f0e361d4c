"""Stage ``fetch``: downloads checksummed against pins."""
