#!/usr/bin/env bash
# `make patches`: export the series as git format-patch files against the
# pristine base, with a cover letter, into $BUILD/patches (or $1).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=${1:-$BUILD/patches}
rm -rf "$out"
mkdir -p "$out"
git -C "$TREE" format-patch -q --cover-letter --thread --subject-prefix="PATCH v${SERIES_VERSION:-3}" -o "$out" base..HEAD
cover=$(ls "$out"/0000-cover-letter.patch)
subject=$(head -1 "$TOP/msg/cover-letter")
body=$(tail -n +3 "$TOP/msg/cover-letter")
python3 - "$cover" "$subject" "$body" <<'PY'
import sys
path, subject, body = sys.argv[1:4]
s = open(path).read()
s = s.replace('*** SUBJECT HERE ***', subject).replace('*** BLURB HERE ***', body)
open(path, 'w').write(s)
PY
echo "export-patches: $(ls "$out" | wc -l) files in $out"
