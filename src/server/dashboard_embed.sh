#!/bin/sh
# Writes src/server/dashboard_page.c (the page as a C string) from src/server/dashboard.html.
# Usage: sh src/server/dashboard_embed.sh [OUT]   (tests/scripts/dashboard_page.sh checks they agree)
set -eu
dir=$(dirname "$0")
out=${1:-$dir/dashboard_page.c}
{
  echo '/* Generated from src/server/dashboard.html by src/server/dashboard_embed.sh: edit the HTML, then'
  echo ' * run the script. "?" is escaped so that no "??x" becomes a C trigraph. */'
  echo '#include "server/dashboard.h"'
  echo
  echo 'const char srv_dash_page[] ='
  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/    "/' -e 's/$/\\n"/' "$dir/dashboard.html"
  echo '    ;'
} > "$out"
