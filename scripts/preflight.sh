#!/usr/bin/env bash
# Preflight: checks, in seconds, that everything `make` and `make test` use
# really works, before any long build: each tool answers, and a static
# "hello" builds and runs for each of the three architectures (x86-64
# natively, AArch64 and s390x under qemu-user). When something is missing it
# stops with one line naming the Debian package(s) to install, instead of a
# compiler error from deep inside a test.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

order=()            # packages in the order their problems were found
declare -A why=()   # package -> what failed, "; "-separated
need() { # need PACKAGE WHAT
  if [ -z "${why[$1]+x}" ]; then order+=("$1"); why[$1]=$2; else why[$1]+="; $2"; fi
}

# Every listed package must be installed (nothing may come from Recommends).
while read -r pkg; do need "$pkg" "not installed"; done < <("$here/install-deps.sh" --check)

# Tools, by the package that provides them.
tool() { command -v "$1" >/dev/null 2>&1 || need "$2" "$1 not found"; }
tool gcc gcc; tool make make; tool objdump binutils; tool nm binutils
tool cmake cmake; tool pkg-config pkg-config; tool python3 python3
tool aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu; tool aarch64-linux-gnu-objdump binutils-aarch64-linux-gnu
tool s390x-linux-gnu-gcc gcc-s390x-linux-gnu; tool s390x-linux-gnu-as binutils-s390x-linux-gnu
tool qemu-x86_64 qemu-user; tool qemu-aarch64 qemu-user; tool qemu-s390x qemu-user
tool chromium chromium
[ -n "$(ls /usr/lib/llvm-*/lib/libclang*.so* 2>/dev/null)" ] || need libclang-dev "no libclang for bindgen"
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need fonts-dejavu-core "no DejaVu font"
command -v cargo >/dev/null 2>&1 || echo "preflight: cargo not found: install a Rust toolchain (rustup) first" >&2

# The C library each compiler links statically, and the package it comes from.
# arch compiler sysroot-libc.a package runner
probes=(
  "x86-64 gcc /usr/lib/x86_64-linux-gnu/libc.a libc6-dev -"
  "AArch64 aarch64-linux-gnu-gcc /usr/aarch64-linux-gnu/lib/libc.a libc6-dev-arm64-cross qemu-aarch64"
  "s390x s390x-linux-gnu-gcc /usr/s390x-linux-gnu/lib/libc.a libc6-dev-s390x-cross qemu-s390x"
)
printf '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n' > "$work/hello.c"
for probe in "${probes[@]}"; do
  read -r arch cc libc pkg runner <<< "$probe"
  command -v "$cc" >/dev/null 2>&1 || continue        # already named above
  [ -e "$libc" ] || { need "$pkg" "$arch C library: no $libc"; continue; }
  exe="$work/hello-$cc"
  if ! err=$("$cc" -static -O2 -o "$exe" "$work/hello.c" 2>&1); then
    need "$pkg" "$arch static hello does not build: $(printf '%s\n' "$err" | grep -m1 -i error)"
    continue
  fi
  if [ "$runner" = - ]; then out=$("$exe" 2>&1); else
    command -v "$runner" >/dev/null 2>&1 || continue  # already named above
    out=$("$runner" "$exe" 2>&1)
  fi
  [ "$out" = hello ] || need qemu-user "$arch static hello printed '${out:0:60}'"
done

# Debian's perf 7.x, which scripts/fetch-linux-perf.sh (make deps) puts in a
# cache and scripts/perf runs through that root's own loader.
perf_problem=""
if ! perf_out=$("$here/perf" --version 2>&1 < /dev/null); then
  perf_problem="scripts/perf --version failed: $(head -n1 <<< "$perf_out")"
elif [[ $perf_out != "perf version 7."* ]]; then
  perf_problem="scripts/perf --version printed '${perf_out:0:60}', not perf 7.x (run scripts/fetch-linux-perf.sh, or make deps)"
fi

if [ ${#order[@]} -ne 0 ]; then
  details=""
  for pkg in "${order[@]}"; do details+="${details:+, }$pkg (${why[$pkg]})"; done
  echo "preflight: missing Debian package(s): $details. Install: apt-get install --no-install-recommends ${order[*]} (or 'make deps' as root)" >&2
fi
[ -z "$perf_problem" ] || echo "preflight: $perf_problem" >&2
[ ${#order[@]} -eq 0 ] && [ -z "$perf_problem" ] || exit 1
echo "preflight: toolchains, qemu-user and chromium work; static hello ran on x86-64, AArch64 and s390x; ${perf_out%%$'\n'*} (scripts/perf)"
