#!/usr/bin/env bash
# Regenerates i18n/fonts/NotoSansSC-oomlab.otf: Noto Sans CJK SC (SIL Open Font License 1.1,
# i18n/fonts/OFL.txt) cut down to the characters of the Chinese catalog (i18n/zh.ftl), printable
# ASCII and common CJK punctuation — egui's own fonts have no CJK glyphs. Run it after changing
# zh.ftl; tests/i18n.rs fails while a character of the catalog is missing from the font.
# Needs Debian's fonts-noto-cjk and Python's fonttools (`pip install fonttools`; a venv is fine:
# PYTHON=/path/to/venv/bin/python scripts/subset-font.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
src=${NOTO_CJK:-/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc}
python=${PYTHON:-python3}
[ -f "$src" ] || { echo "no $src: apt-get install fonts-noto-cjk (or set NOTO_CJK)" >&2; exit 1; }
text=$(mktemp)
trap 'rm -f "$text"' EXIT
cat i18n/zh.ftl > "$text"
printf '%s\n' ' !"#$%&'"'"'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_`abcdefghijklmnopqrstuvwxyz{|}~' >> "$text"
printf '%s\n' '，。、：；！？（）《》「」『』“”‘’——…·×÷±≤≥≈→←↑↓％' >> "$text"
# Face 2 of the collection is Simplified Chinese (0 JP, 1 KR, 2 SC, 3 TC, 4 HK).
"$python" -m fontTools.subset "$src" --font-number=2 --text-file="$text" \
    --output-file=i18n/fonts/NotoSansSC-oomlab.otf --no-hinting --desubroutinize --name-IDs='*' --name-languages='*'
ls -l i18n/fonts/NotoSansSC-oomlab.otf
