"""Small tensor helpers shared by modules (masks only)."""
