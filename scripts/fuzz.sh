#!/usr/bin/env bash
# `make fuzz`: the libFuzzer targets in fuzz/ (fuzz/README.md), built by cargo-fuzz on the stable
# toolchain and run one after another (the machine has 2 cores) for FUZZ_SECONDS each.
#
#   FUZZ_SECONDS=300     seconds per target (CI: 60)
#   FUZZ_TARGETS="a b"   only these targets (default: every one `cargo fuzz list` names)
#
# cargo-fuzz builds with AddressSanitizer and -Zbuild-std by default, both nightly-only; with
# `--sanitizer none` it passes rustc only stable flags (`-Cpasses=sancov-module` and the
# `-Cllvm-args=-sanitizer-coverage-*` options) and libfuzzer-sys builds libFuzzer with the C++
# compiler. Safe Rust needs no ASan to find what it finds: panics, failed asserts, arithmetic
# overflow (debug assertions are on), stack overflow, out-of-memory and timeouts.
#
# Each target reads its seeds from fuzz/corpus/<target>/ (committed) and writes what it finds
# to fuzz/target/corpus/<target>/ (not committed), so the committed seeds stay as they are and a
# later run starts from the last one's corpus. A crash stops that target: its input is in
# fuzz/artifacts/<target>/; the other targets still run and the script fails at the end.
set -euo pipefail

cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-300}
CARGO_FUZZ_VERSION=0.13.2
# The same flags for build and run, so run does not rebuild. Release with debug assertions
# (fuzz/Cargo.toml's profile); 16 codegen units halve the build on 2 cores for little speed.
FLAGS=(--release --debug-assertions --sanitizer none --codegen-units 16)

if ! cargo fuzz --version 2>/dev/null | grep -qF "$CARGO_FUZZ_VERSION"; then
    echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION from crates.io"
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

targets=${FUZZ_TARGETS:-$(cd fuzz && cargo fuzz list)}

start=$(date +%s)
(cd fuzz && cargo fuzz build "${FLAGS[@]}")
echo "fuzz: built in $(($(date +%s) - start)) s"

summary=()
failed=()
for target in $targets; do
    mkdir -p "fuzz/target/corpus/$target"
    log="fuzz/target/$target.log"
    echo "fuzz: $target for ${FUZZ_SECONDS} s"
    status=0
    # -timeout: one input running 10 s is a hang, reported as a crash.
    (cd fuzz && cargo fuzz run "${FLAGS[@]}" "$target" "target/corpus/$target" "corpus/$target" -- \
        -max_total_time="$FUZZ_SECONDS" -timeout=10 -print_final_stats=1) >"$log" 2>&1 || status=$?
    execs=$(awk '/stat::number_of_executed_units:/ { print $2 }' "$log")
    rate=$(awk '/stat::average_exec_per_sec:/ { print $2 }' "$log")
    corpus=$(find "fuzz/target/corpus/$target" "fuzz/corpus/$target" -type f | wc -l)
    if [ "$status" -eq 0 ]; then
        result=ok
    else
        result="FAILED (exit $status)"
        failed+=("$target")
        grep -E "panicked|ERROR: libFuzzer|SUMMARY|Test unit written" "$log" | head -n 8 || true
    fi
    summary+=("$(printf '%-22s %12s execs %8s/s  corpus %6s  %s' "$target" "${execs:-?}" "${rate:-?}" "$corpus" "$result")")
done

echo "fuzz: ${FUZZ_SECONDS} s per target, $(($(date +%s) - start)) s in all (logs in fuzz/target/<target>.log)"
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: crashes in ${failed[*]}: inputs in fuzz/artifacts/<target>/;" \
        "reproduce with: cd fuzz && cargo fuzz run ${FLAGS[*]} <target> <input>"
    exit 1
fi
