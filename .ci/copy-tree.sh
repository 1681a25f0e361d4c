# Sourced by the SLURM CI scripts (REPO set, cwd the repository):
#   copy_tree DIR   the tracked and untracked-but-not-ignored files into DIR, .venv linked
copy_tree() {
    mkdir -p "$1"
    git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$1" 2>/dev/null || true
    ln -s "$REPO/.venv" "$1/.venv"
}
