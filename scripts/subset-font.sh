#!/usr/bin/env bash
# Regenerates the app's three fonts in i18n/fonts/, cut down to what the app draws:
#
# - NotoSansSC-oomlab.otf: Noto Sans CJK SC (SIL Open Font License 1.1, OFL.txt) cut to the
#   characters of the Chinese catalog (i18n/zh.ftl, but for the students' page's student-* and the
#   CLI's cli-*: what src/i18n.rs's NATIVE_ONLY names), printable ASCII and common CJK punctuation —
#   egui's own fonts have no CJK glyphs. Run this after changing zh.ftl; tests/i18n.rs fails while
#   a character of the catalog is missing from the font.
# - NotoSansSC-names-oomlab.otf: the same Noto Sans CJK SC cut to what students' names are
#   written in — GB2312's 6,763 hanzi, Latin with its extensions, Greek, Cyrillic, kana and the
#   CJK and full-width punctuation. Only the teacher's list of students draws it (a name is any
#   text a student types): the desktop embeds it, the web build fetches it when the list opens.
# - UbuntuLight-derivative-oomlab.ttf and Hack-oomlab.ttf: egui's two default fonts (Ubuntu Light,
#   Ubuntu Font Licence 1.0, UFL.txt; Hack, MIT + Bitstream Vera licence, Hack-LICENSE.txt) cut to
#   Latin-1, Greek, and the punctuation, arrows, super/subscripts, math and shapes blocks (Hack,
#   the monospace font, to ASCII, Latin-1 and punctuation). They
#   replace egui's bundled fonts in the web build, whose full versions cost 320 kB of the wasm's
#   2.5 MB gzipped budget. The desktop's keep their hinting, so text renders exactly as with
#   egui's fonts; the web build's (-web.ttf) drop it (below). Both
#   licences require a modified font to be renamed: the UFL to "<name> derivative <work>", the
#   Vera licence to a name without "Bitstream" or "Vera" — the script renames them. The app
#   tests render every tab with egui's missing-glyph policy set to panic.
#
# Needs Debian's fonts-noto-cjk and Python's fonttools (`pip install fonttools`; a venv is fine:
# PYTHON=/path/to/venv/bin/python scripts/subset-font.sh). egui's fonts come from the cargo
# registry (cargo fetch has them).
set -euo pipefail
# Reproducible output: fontTools stamps "modified" with this instead of the clock.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1764547200}
cd "$(dirname "$0")/.."
src=${NOTO_CJK:-/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc}
python=${PYTHON:-python3}
[ -f "$src" ] || { echo "no $src: apt-get install fonts-noto-cjk (or set NOTO_CJK)" >&2; exit 1; }
egui_fonts=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/epaint_default_fonts-0.37.*/fonts | tail -n1)
[ -d "$egui_fonts" ] || { echo "no epaint_default_fonts 0.37 in the cargo registry: run cargo fetch" >&2; exit 1; }
out=i18n/fonts
text=$(mktemp)
trap 'rm -f "$text"' EXIT
# Not the students' page's words (student-*): that page is HTML, drawn with the phone's own
# fonts, and its glyphs would only weigh on the app's wasm; nor the CLI's (cli-*, a terminal's).
grep -v -e '^student-' -e '^cli-' i18n/zh.ftl > "$text"
printf '%s\n' ' !"#$%&'"'"'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_`abcdefghijklmnopqrstuvwxyz{|}~' >> "$text"
printf '%s\n' '，。、：；！？（）《》「」『』“”‘’——…·×÷±≤≥≈→←↑↓％' >> "$text"
# Face 2 of the collection is Simplified Chinese (0 JP, 1 KR, 2 SC, 3 TC, 4 HK).
"$python" -m fontTools.subset "$src" --font-number=2 --text-file="$text" \
    --output-file=$out/NotoSansSC-oomlab.otf --no-hinting --desubroutinize --name-IDs='*' --name-languages='*'

# Students' names: GB2312's hanzi (rows 0xB0-0xF7) and the scripts names come in besides.
names=$(mktemp)
trap 'rm -f "$text" "$names"' EXIT
"$python" -c "import sys; sys.stdout.write(''.join(bytes([h, l]).decode('gb2312', 'ignore') for h in range(0xB0, 0xF8) for l in range(0xA1, 0xFF)))" > "$names"
"$python" -m fontTools.subset "$src" --font-number=2 --text-file="$names" \
    --unicodes='U+0020-007E,U+00A0-024F,U+0300-036F,U+0370-03FF,U+0400-04FF,U+1E00-1EFF,U+2000-206F,U+3000-303F,U+3040-30FF,U+FF00-FFEF' \
    --output-file=$out/NotoSansSC-names-oomlab.otf --no-hinting --desubroutinize --name-IDs='*' --name-languages='*'

latin='U+0020-007E,U+00A0-00FF,U+0300-036F,U+0391-03C9,U+1D00-1DBF,U+2000-206F,U+2070-209F,U+20AC,U+2190-21FF,U+2200-22FF,U+25A0-25FF,U+FFFD'
# The monospace font draws only sizes, addresses and PyTorch's OOM message (ASCII); anything else
# in a monospace label falls back to the sans font (src/app/fonts.rs), so Hack keeps ASCII, the
# Latin-1 signs figures use (no-break space, °, ±, ², ³, µ, ·, ×, ÷) and general punctuation:
# about 20 kB gzipped instead of 64 kB of the web build.
mono='U+0020-007E,U+00A0,U+00B0-00B3,U+00B5,U+00B7,U+00D7,U+00F7,U+2000-206F'
subset_latin() { # source, output, family, postscript name, unicodes
    "$python" -m fontTools.subset "$egui_fonts/$1" --unicodes="$5" --output-file="$2" 2>/dev/null
    "$python" - "$2" "$3" "$4" <<'PY'
import sys
from fontTools.ttLib import TTFont
path, family, postscript = sys.argv[1:]
font = TTFont(path)
names = font["name"]
for record in list(names.names):
    if record.nameID in (1, 3, 4, 6, 16, 17, 18, 21, 22):
        names.removeNames(nameID=record.nameID)
names.setName(family, 1, 3, 1, 0x409)
names.setName(family, 4, 3, 1, 0x409)
names.setName(f"{family}; subset for oomlab", 3, 3, 1, 0x409)
names.setName(postscript, 6, 3, 1, 0x409)
font.save(path)
PY
}
subset_latin Ubuntu-Light.ttf $out/UbuntuLight-derivative-oomlab.ttf "Ubuntu Light derivative oomlab" UbuntuLight-derivative-oomlab "$latin"
subset_latin Hack-Regular.ttf $out/Hack-oomlab.ttf "Hack oomlab" Hack-oomlab "$mono"
# The web build's copies: the same glyphs without their TrueType instructions (fpgm, prep, cvt
# and each glyph's program are most of a hinted font's bytes: 43 kB of the 76 kB the two cost
# the gzipped module). skrifa, egui's font reader, hints an uninstructed font with its
# auto-hinter, so the web text is still grid-fitted; the desktop keeps the fonts' own hinting.
for f in UbuntuLight-derivative-oomlab Hack-oomlab; do
    "$python" -m fontTools.subset $out/$f.ttf --unicodes='*' --no-hinting --name-IDs='*' \
        --name-languages='*' --output-file=$out/$f-web.ttf
done
cp "$egui_fonts/UFL.txt" $out/UFL.txt
cp "$egui_fonts/Hack-Regular.txt" $out/Hack-LICENSE.txt
ls -l $out
