# Sourced by the scripts that check capture control on a simulator (25-capture-oracle.sh,
# 22-verilator.sh, 23-simavr.sh). Needs $work (a scratch directory) and $jets (the jets CLI).
#
# capture_check NAME FULL RUN...: for each JETS_CAPTURE setting read from standard input, runs
# `RUN... OUT` under it into $work/NAME-I.jets, and checks that `jets cut` of FULL (the same run,
# unfiltered) under the setting is that file byte for byte (CAP-CUT-1); then has
# capture_oracle.py check every file against FULL. Fails naming the first difference.
capture_oracle="$(dirname "${BASH_SOURCE[0]}")/capture_oracle.py"

capture_check() {
    local name=$1 full=$2
    shift 2
    local args=() i=0 s
    while read -r s; do
        [ -n "$s" ] || continue
        i=$((i + 1))
        JETS_CAPTURE="$s" "$@" "$work/$name-$i.jets" >/dev/null
        args+=("$s=$work/$name-$i.jets")
        "$jets" cut --capture "$s" "$full" -o "$work/$name-$i.cut.jets" >/dev/null
        cmp -s "$work/$name-$i.jets" "$work/$name-$i.cut.jets" \
            || { echo "FAIL: jets cut --capture '$s' differs from the $name run's own trace"; return 1; }
    done
    [ "$i" -gt 0 ] || { echo "FAIL: no settings for $name"; return 1; }
    python3 "$capture_oracle" "$full" "${args[@]}" | tee "$work/$name.oracle" | grep -v '^ok' || true
    echo "$name: $(grep -c '^ok' "$work/$name.oracle") settings agree with the oracle, and jets cut with the run"
    ! grep -q MISMATCH "$work/$name.oracle"
}
