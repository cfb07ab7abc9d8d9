#!/bin/bash
# Issue 34's "real work": the file-heavy steps of a build, run in a fresh folder.
#   real-work.sh SRC WORK
# copies the tree SRC to WORK/tree, byte-compiles its Python, tars it, commits it to a new git
# repository and checksums every file. WORK must not exist. Prints nothing on success, or
# each step's time on stderr when REAL_WORK_STEPS=1.
set -euo pipefail
step() {
  if [ "${REAL_WORK_STEPS:-}" = 1 ]; then
    local t=$EPOCHREALTIME; "$@"; echo "$(( (${EPOCHREALTIME/./} - ${t/./}) / 1000 )) ms: $1 $2" >&2
  else "$@"; fi
}
src=$1 work=$2
mkdir "$work"
cd "$work"
step cp -r "$src" tree
step python3 -m compileall -q -j 1 tree >/dev/null || true
step tar cf tree.tar tree
git init -q tree
step git -C tree -c user.name=bench -c user.email=bench@example.org add -A
step git -C tree -c user.name=bench -c user.email=bench@example.org commit -q -m work
step bash -c "find tree -type f -not -path 'tree/.git/*' -print0 | sort -z | xargs -0 sha256sum >sums"
