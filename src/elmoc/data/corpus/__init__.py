"""Stage ``corpus``: source formats -> tokenized sentences -> train shards and the heldout file."""
