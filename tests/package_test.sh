#!/usr/bin/env bash
# What `cmake --install` and `cpack -G DEB` deliver (CTest label "package"; a few seconds each).
#   package_test.sh install BUILD_DIR VERSION C_COMPILER MODEL.cact
#     installs the build into a temporary prefix and checks every file: bin/needle runs and
#     prints VERSION and needs no build-tree RUNPATH; libneedle.so -> .so.0 -> .so.VERSION with
#     soname libneedle.so.0; a C program built against the installed needle.h and libneedle.so
#     opens MODEL and reports a missing file; libneedle.a holds objects; the man page renders
#     (man -l, no groff warnings) with a section per subcommand of `needle --help`; the
#     completion registers `needle` and completes subcommands.
#   package_test.sh deb BUILD_DIR VERSION
#     builds the .deb with cpack into a temporary folder and checks its fields (name, version,
#     architecture, maintainer, description), its Depends (the runtime packages with versions,
#     no -dev package), its files (as above, under /usr), the ldconfig call and the shlibs
#     file, and runs the extracted binary.
# CMAKE and CPACK (environment) name the tools (default: from PATH).
set -uo pipefail
mode="$1"
build="$(cd "$2" && pwd)"
version="$3"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

check_version() {  # BINARY
  local first
  first="$("$1" --version | head -n 1)"
  [[ "$first" == "needle $version" ]] || fail "$1 --version printed '$first', not 'needle $version'"
}

# Every installed file under ROOT (a prefix, or usr/ of the extracted package).
check_tree() {  # ROOT
  local root="$1" lib
  [[ -x "$root/bin/needle" ]] || fail "no executable bin/needle"
  [[ -f "$root/include/needle.h" ]] || fail "no include/needle.h"
  [[ -f "$root/share/man/man1/needle.1" ]] || fail "no share/man/man1/needle.1"
  [[ -f "$root/share/bash-completion/completions/needle" ]] ||
    fail "no share/bash-completion/completions/needle"
  lib="$(find "$root" -name "libneedle.so.$version" -type f | head -n 1)"
  if [[ -z "$lib" ]]; then
    fail "no libneedle.so.$version"
    return
  fi
  lib="$(dirname "$lib")"
  [[ "$(readlink "$lib/libneedle.so.0")" == "libneedle.so.$version" ]] ||
    fail "libneedle.so.0 does not link to libneedle.so.$version"
  [[ "$(readlink "$lib/libneedle.so")" == "libneedle.so.0" ]] ||
    fail "libneedle.so does not link to libneedle.so.0"
  readelf -d "$lib/libneedle.so.$version" | grep -q 'SONAME.*\[libneedle\.so\.0\]' ||
    fail "the soname of libneedle.so.$version is not libneedle.so.0"
  ar t "$lib/libneedle.a" 2>/dev/null | grep -q '\.o$' || fail "libneedle.a holds no objects"
  if readelf -d "$root/bin/needle" | grep -qE 'RPATH|RUNPATH'; then
    fail "bin/needle keeps a RUNPATH: $(readelf -d "$root/bin/needle" | grep -E 'RPATH|RUNPATH')"
  fi
  check_version "$root/bin/needle"
  # The generated files are the ones the build made (their content: completion_test.sh, below).
  cmp -s "$root/share/man/man1/needle.1" "$build/needle.1" || fail "needle.1 differs from the build's"
  cmp -s "$root/share/bash-completion/completions/needle" "$build/needle.bash" ||
    fail "the completion differs from the build's needle.bash"
  libdir="$lib"
}

case "$mode" in
  install)
    cc="$4"
    model="$5"
    prefix="$work/prefix"
    if ! "${CMAKE:-cmake}" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then
      cat "$work/install.log"
      fail "cmake --install exited non-zero"
    fi
    libdir=""
    check_tree "$prefix"

    # The header and the shared library, as a user builds against them.
    cat >"$work/use.c" <<'EOF'
#include <needle.h>
#include <stdio.h>
int main(int argc, char** argv) {
  char error[256] = "";
  needle_model* missing = needle_model_open("/nonexistent/model.cact", error, sizeof error);
  if (missing != NULL || error[0] == '\0') return 1;
  needle_model* model = needle_model_open(argv[1], error, sizeof error);
  if (model == NULL) {
    fprintf(stderr, "%s\n", error);
    return 1;
  }
  needle_model_free(model);
  puts("ok");
  return argc == 2 ? 0 : 1;
}
EOF
    if [[ -n "$libdir" ]]; then
      if "$cc" -I"$prefix/include" "$work/use.c" -L"$libdir" -lneedle -o "$work/use" \
        2>"$work/cc.log"; then
        out="$(LD_LIBRARY_PATH="$libdir" "$work/use" "$model")"
        [[ "$out" == "ok" ]] || fail "a program linked with the installed libneedle failed: $out"
      else
        cat "$work/cc.log"
        fail "a C program does not build against the installed needle.h and libneedle.so"
      fi
    fi

    # The man page renders, without warnings, with every subcommand.
    page="$prefix/share/man/man1/needle.1"
    warnings="$(groff -man -ww -z "$page" 2>&1)"
    [[ -z "$warnings" ]] || fail "groff warns on needle.1: $warnings"
    rendered="$(MANWIDTH=100 MANPAGER=cat man -l "$page" 2>&1)" || fail "man -l needle.1 failed"
    for heading in NAME SYNOPSIS DESCRIPTION OPTIONS SUBCOMMANDS "EXIT STATUS"; do
      grep -qx "$heading" <<<"$rendered" || fail "the man page has no $heading section"
    done
    subcommands="$("$prefix/bin/needle" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NF > 1 {print $1}')"
    [[ -n "$subcommands" ]] || fail "no subcommands in needle --help"
    for sub in $subcommands; do
      grep -qx "   $sub" <<<"$rendered" || fail "the man page has no section for $sub"
      grep -q "needle $sub \[OPTIONS\]" <<<"$rendered" || fail "the man page has no usage of $sub"
    done

    # The completion loads and completes.
    completion="$prefix/share/bash-completion/completions/needle"
    got="$(bash -c 'source "$1" && complete -p needle && COMP_WORDS=(needle ru) &&
      COMP_CWORD=1 && _needle && echo "${COMPREPLY[*]}"' _ "$completion" 2>&1)"
    [[ "$got" == $'complete -F _needle needle\nrun' ]] ||
      fail "the installed completion does not complete 'needle ru': $got"
    ;;
  deb)
    out="$work/deb"
    if ! "${CPACK:-cpack}" --config "$build/CPackConfig.cmake" -G DEB -B "$out" >"$work/cpack.log" 2>&1; then
      cat "$work/cpack.log"
      fail "cpack -G DEB exited non-zero"
    fi
    arch="$(dpkg --print-architecture)"
    deb="$out/needle_${version}_${arch}.deb"
    if [[ ! -f "$deb" ]]; then
      ls -l "$out"
      fail "no $deb"
      echo "$failures failed"
      exit 1
    fi
    field() { dpkg-deb -f "$deb" "$1"; }
    [[ "$(field Package)" == "needle" ]] || fail "Package: $(field Package)"
    [[ "$(field Version)" == "$version" ]] || fail "Version: $(field Version)"
    [[ "$(field Architecture)" == "$arch" ]] || fail "Architecture: $(field Architecture)"
    [[ "$(field Maintainer)" =~ ^[^\<]+\ \<[^@\>]+@[^\>]+\>$ ]] ||
      fail "Maintainer is not 'Name <address>': $(field Maintainer)"
    description="$(field Description)"
    [[ "$(head -n 1 <<<"$description")" == *"Needle 2"* && $(wc -l <<<"$description") -ge 2 ]] ||
      fail "Description has no summary and long text: $description"
    depends="$(field Depends)"
    echo "Depends: $depends"
    # What libneedle.so links (the needle binary is static; fmt and spdlog are headers).
    for package in libc6 libgomp1 libstdc++6 libgcc-s1; do
      [[ ", $depends," =~ ,\ ${package//+/\\+}\ \(\>=\ [^\)]+\), ]] ||
        fail "Depends has no versioned $package"
    done
    [[ "$depends" != *libfmt* && "$depends" != *libspdlog* ]] ||
      fail "Depends names fmt or spdlog, which are used as headers"
    [[ "$depends" != *-dev* ]] || fail "Depends names a -dev package"

    files="$(dpkg-deb -c "$deb" | awk '{print $6}')"
    for path in ./usr/bin/needle ./usr/include/needle.h ./usr/share/man/man1/needle.1 \
      ./usr/share/bash-completion/completions/needle; do
      grep -qx "$path" <<<"$files" || fail "the package has no $path"
    done
    for name in "libneedle.so.$version" libneedle.so.0 libneedle.so libneedle.a; do
      grep -q "^\./usr/lib/\(.*/\)\?$name$" <<<"$files" || fail "the package has no /usr/lib/.../$name"
    done
    dpkg-deb -x "$deb" "$work/root" || fail "dpkg-deb -x failed"
    libdir=""
    check_tree "$work/root/usr"
    dpkg-deb -e "$deb" "$work/control" || fail "dpkg-deb -e failed"
    grep -q ldconfig "$work/control/postinst" 2>/dev/null || fail "postinst does not run ldconfig"
    grep -qx "libneedle 0 needle (>= $version)" "$work/control/shlibs" 2>/dev/null ||
      fail "no shlibs line 'libneedle 0 needle (>= $version)'"
    ;;
  *)
    echo "usage: package_test.sh install|deb BUILD_DIR VERSION ..." >&2
    exit 2
    ;;
esac
echo "$mode: $failures failed"
[[ $failures -eq 0 ]]
