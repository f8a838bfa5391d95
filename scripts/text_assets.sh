#!/usr/bin/env bash
# Offline English text for the `english` corpus (interp/data/english/text_assets.py), from Debian packages, without root:
# `apt-get download` (pinned version, sha256 checked) + `dpkg-deb -x`, then each source is rendered ONCE into
# plain files under DEST (default $VENV/share/interp-text, where interp.data.english.text_assets looks; INTERP_TEXT_DIR
# overrides both). Idempotent: a source whose DEST/<name>/.done holds its pin is skipped in milliseconds.
# Optional but default: a source that cannot be fetched (no apt, no mirror, a pin gone) is reported and
# skipped, and this script still exits 0, so `make test` works; the `english` corpus then names what is missing.
set -uo pipefail
VENV=${VENV:-.venv}
DEST=${INTERP_TEXT_DIR:-$VENV/share/interp-text}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# name | Debian packages (name=version) | their sha256, same order ('-': any, for a security-updated package)
SOURCES=(
"austen|r-cran-janeaustenr=1.0.0-1|df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
"kjv|bible-kjv=4.38 bible-kjv-text=4.38|75a49c032a6efa9faa2beb4a9acb70974380122906329d0e100de36cc88ff02d d61b6aad4c51ba9e2800b825325fa6a09e99a0d02a9bb6dc4724fcc4995a1b7a"
"web|sword-text-web=426.0-1 diatheke=1.9.0+dfsg-4+b4 libsword1.9.0=1.9.0+dfsg-4+b4 libsword-common=1.9.0+dfsg-4 libclucene-core1v5=2.3.3.4+dfsg-1.1|930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1 65b337d12905cf4a5b264423bba7bed5c9f06a152ac694846cf7f6d704ba230a 07e8e129333230caea3d3a934c564a94a60980905df9488a246140d6241e2063 3bf0fc6153a7927abf8125342240c01ba10ca242497dc329475a54523f722873 1ff60c48f57ff22f3895579a6099ab47ca9f12baca85344866a245faaa40f71c"
"pydoc|python3.11-doc=3.11.2-6+deb12u9|-"
)

note() { echo "text assets: $*" >&2; }
UPDATED=0
download() {  # apt-get download, after one 'apt-get update' (root only) if the package lists are stale or empty
    apt-get download -q "$1" >/dev/null 2>>apt.err && return 0
    if [[ $UPDATED == 0 && $(id -u) == 0 ]]; then
        UPDATED=1
        apt-get update -qq >/dev/null 2>>apt.err || true
        apt-get download -q "$1" >/dev/null 2>>apt.err && return 0
    fi
    return 1
}

fetch() {  # fetch NAME "pkg=ver ..." "sha ..." -> extracted into $WORK/NAME/root
    local name=$1 root=$WORK/$1/root; local -a pkgs=($2) shas=($3)
    mkdir -p "$root" && cd "$WORK/$name" || return 1
    local i pkg deb
    for i in "${!pkgs[@]}"; do
        pkg=${pkgs[$i]}
        if ! download "$pkg"; then
            if [[ ${shas[$i]:-} == "-" ]] && download "${pkg%%=*}"; then
                note "$name: $pkg is gone from the mirror; using its current version (the corpus hash changes)"
            else
                note "$name: SKIPPED: apt-get download $pkg failed ($(tail -n1 apt.err)); run 'apt-get update' and rerun scripts/setup.sh"
                return 1
            fi
        fi
        deb=$(ls -t ./"${pkg%%=*}"_*.deb | head -n1)
        if [[ ${shas[$i]:-} != "-" ]] && ! echo "${shas[$i]}  $deb" | sha256sum -c --quiet - >/dev/null 2>&1; then
            note "$name: SKIPPED: $deb does not match its pinned sha256 ${shas[$i]}"
            return 1
        fi
        dpkg-deb -x "$deb" "$root" || return 1
        echo "$(basename "$deb") $(sha256sum "$deb" | cut -c1-64)" >> packages.txt
    done
}

render() {  # render NAME -> the files interp.data.english.text_assets reads, in $WORK/NAME/out
    local name=$1 root=$WORK/$1/root out=$WORK/$1/out
    mkdir -p "$out"
    case $name in
        austen)  # R lazy-load database (one character vector of lines per novel), read by interp.data.english.rlazy
            cp "$root"/usr/lib/R/site-library/janeaustenr/data/Rdata.rd[bx] "$out"/ ;;
        kjv)     # the bible program's own renderer: "Book C" headers, one "  V text" line per verse
            "$root"/usr/bin/bible -p "$root"/usr/lib -l0 "gen1:1-rev22:21" > "$out"/kjv.txt ;;
        web)     # libsword's renderer, OSIS markup kept (plain output glues words where footnotes were)
            LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu" SWORD_PATH="$root/usr/share/sword" \
                "$root"/usr/bin/diatheke -b engWEB2015eb -f OSIS -k "Gen 1:1-Rev 22:21" > "$out"/web.osis ;;
        pydoc)   # the reStructuredText sources of the HTML docs
            cp -r "$root"/usr/share/doc/python3.11/html/_sources "$out"/ ;;
    esac
    [[ -n "$(ls -A "$out")" ]] && [[ $(du -sk "$out" | cut -f1) -gt 100 ]]
}

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || {
    note "apt-get/dpkg-deb not found: the english corpus's Debian sources are not installed (wiki and shakespeare still work)"
    exit 0
}
for entry in "${SOURCES[@]}"; do
    IFS='|' read -r name pkgs shas <<< "$entry"
    pin="$pkgs"
    if [[ -f "$DEST/$name/.done" && "$(cat "$DEST/$name/.done")" == "$pin" ]]; then
        continue
    fi
    if fetch "$name" "$pkgs" "$shas" && render "$name"; then
        rm -rf "$DEST/$name.tmp" && mv "$WORK/$name/out" "$DEST/$name.tmp" \
            && cp "$WORK/$name/packages.txt" "$DEST/$name.tmp/PACKAGES" \
            && rm -rf "$DEST/$name" && mv "$DEST/$name.tmp" "$DEST/$name" && echo "$pin" > "$DEST/$name/.done" \
            && note "$name: installed into $DEST/$name"
    else
        note "$name: not installed (see above); the 'english' corpus will name it as missing"
    fi
    cd "$WORK" || exit 0
done
exit 0
