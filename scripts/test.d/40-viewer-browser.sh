#!/usr/bin/env bash
# The web viewer in a real browser: `jets view` and `jets gantt` pages in Debian's headless
# Chromium, driven by playwright-core (from the npm registry; it never downloads a browser).
# Bars, markers, zoom, details, escaping of names with markup, following a file that another
# process appends to, pipeline mode on the demo trace (stage names per cycle, D-cache misses as
# warnings at every zoom), the same pipeline mode in a `jets gantt` page (stalls hatched, flushes
# marked, jumps), lane headers that are never cut, merged markers that keep the highest severity
# and the count, axis labels, and a jump into the middle of a 1 M-instruction run that the example
# pipeline simulator writes here. Release builds: a debug `jets view` takes minutes to
# index the 740 MB that run writes.
# Screenshots are kept in target/viewer-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
apt_install chromium nodejs ca-certificates
if ! command -v npm >/dev/null 2>&1; then
    apt_install npm
fi

target="${CARGO_TARGET_DIR:-$root/target}"
cargo build -p jets-cli -p jets-examples --release --bins --locked --quiet
artifacts="$root/target/viewer-artifacts"
rm -rf "$artifacts"
mkdir -p "$artifacts"

cd viewer-cli/tests/browser
npm ci --no-audit --no-fund --loglevel=error
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo unknown), node $(node --version)"
JETS_BIN="$target/release/jets" PIPELINE_BIN="$target/release/pipeline" ARTIFACTS="$artifacts" node --test --test-reporter=spec viewer.test.mjs
echo "screenshots: $artifacts"
