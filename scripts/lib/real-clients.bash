# Sourced by the scripts/test.d suites that run real clients: installs them from their registries
# once into target/real-clients (reinstalled when the pins change) and sets
#   $REAL_CLIENTS_PY   a Python with dftracer-utils, denet, perfetto (protos) and protobuf
#   $REAL_CLIENTS_NPM  a node_modules directory with @paulirish/trace_engine
real_clients_dir="${CARGO_TARGET_DIR:-$PWD/target}/real-clients"
mkdir -p "$real_clients_dir"

real_clients_python() {
    apt_install python3-venv
    local venv="$real_clients_dir/venv"
    local pins=(dftracer-utils==0.0.14 denet==0.10.3 'perfetto==0.59.1' 'protobuf>=4,<7')
    if [ "$(cat "$venv/.pins" 2>/dev/null)" != "${pins[*]}" ]; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q "${pins[@]}"
        echo "${pins[*]}" >"$venv/.pins"
    fi
    REAL_CLIENTS_PY="$venv/bin/python"
}

real_clients_npm() {
    command -v npm >/dev/null || apt_install nodejs npm
    local dir="$real_clients_dir/npm"
    local pkg="$dir/node_modules/@paulirish/trace_engine/package.json"
    if ! grep -q '"version": "0.0.65"' "$pkg" 2>/dev/null; then
        mkdir -p "$dir"
        (cd "$dir" && npm install --silent --no-audit --no-fund --prefix . @paulirish/trace_engine@0.0.65)
    fi
    REAL_CLIENTS_NPM="$dir/node_modules"
}
