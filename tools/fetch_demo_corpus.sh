#!/usr/bin/env bash
# Fetches the demo model's training corpus: the King James Version of the Bible (public domain;
# Debian packages bible-kjv-text + bible-kjv, whose `bible` program prints the text), and splits it
# into .corpus/kjv-train.txt (training + validation) and tests/data/demo-heldout.txt (never trained on).
# Needs apt-get (Debian). Run from the repository root:  bash tools/fetch_demo_corpus.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .corpus tests/data
grep -qx '/.corpus/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.corpus/' >> .git/info/exclude; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download bible-kjv-text bible-kjv >/dev/null)
for f in "$tmp"/*.deb; do dpkg -x "$f" "$tmp/x"; done
ls "$tmp"/*.deb | xargs -n1 basename > .corpus/packages.txt
# -f turns pretty-printing off: one verse a line, "Ge1:1 In the beginning ..."
(cd "$tmp/x/usr/lib" && ../bin/bible -f -p . gen1:1-rev22:21) > .corpus/kjv-raw.txt
python3 tools/train_demo.py prepare .corpus/kjv-raw.txt
