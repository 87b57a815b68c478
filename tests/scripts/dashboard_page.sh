#!/usr/bin/env bash
# The dashboard page compiled into the server (src/server/dashboard_page.c) is the one in
# src/server/dashboard.html: regenerates it into a temp file and compares.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
sh src/server/dashboard_embed.sh "$tmp"
if ! cmp -s "$tmp" src/server/dashboard_page.c; then
  echo "src/server/dashboard_page.c is out of date: run sh src/server/dashboard_embed.sh"
  exit 1
fi
echo "dashboard_page.c matches dashboard.html"
