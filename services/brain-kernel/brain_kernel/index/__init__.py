"""The index of the vault: entries, file stats, the one path for changed files."""
