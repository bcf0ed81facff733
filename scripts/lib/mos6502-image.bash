# Sourced by the scripts that run the mos6502 crate: `mos6502_image` prints the path of Klaus
# Dormann's 6502 functional test image, which the crate ships in its tests/assets. This platform's
# packages only: unfiltered, cargo metadata needs every platform's manifests, which a fresh machine
# that built only for this one does not have offline.
mos6502_image() {
    local host manifest
    host=$(rustc -vV | sed -n 's/^host: //p')
    manifest=$(cargo metadata --format-version 1 --locked --offline --filter-platform "$host" \
        | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="mos6502"))') \
        || return 1
    echo "$(dirname "$manifest")/tests/assets/6502_functional_test.bin"
}
