# Sample text rows move from msgpack `[prompts, completions]` (format byte 0 raw, or 1 zlib,
# compressed by a background thread after the commit; `compressed` said which) to the packed
# format of ingest.texts (byte 3: the step's distinct strings concatenated, their lengths and
# each sample's index, compressed in bulk in the message's transaction). Every existing row is
# converted here (nothing is lost), then `compressed` and its partial index go.

import zlib

import msgpack
import numpy as np
from django.db import migrations

PACKED = b"\x03"  # as ingest.texts (a migration keeps its own copy of the format)
ROWS = 200  # rows converted per query


def _legacy(data):
    if data[:1] == b"\x01":
        return msgpack.unpackb(zlib.decompress(data[1:]), raw=False)
    if data[:1] == b"\x00":
        return msgpack.unpackb(data[1:], raw=False)
    return None  # already packed


def _pack(cols):
    present = [c for c in cols if c is not None]
    n = len(present[0]) if present else 0
    values = sum(present, [])
    distinct = dict.fromkeys(values)
    distinct.pop(None, None)
    strings = list(distinct)
    where = dict(zip(strings, range(len(strings)), strict=True))
    where[None] = -1
    index = np.fromiter(map(where.__getitem__, values), np.int32, len(values))
    lengths = np.fromiter(map(len, strings), np.int32, len(strings))
    text = "".join(strings).encode("utf-8", "surrogatepass")
    payload = msgpack.packb([n, [c is not None for c in cols], index.astype("<i4").tobytes(),
                             lengths.astype("<i4").tobytes(), text], use_bin_type=True)
    return PACKED + zlib.compress(payload, 1)


def convert(apps, schema_editor):
    conn = schema_editor.connection
    last = 0
    with conn.cursor() as cur:
        while True:
            cur.execute("SELECT id, data FROM ingest_sampletext WHERE id > %s ORDER BY id"
                        f" LIMIT {ROWS}", [last])
            found = cur.fetchall()
            if not found:
                return
            last = found[-1][0]
            rows = []
            for pk, data in found:
                cols = _legacy(bytes(data))
                if cols is not None:
                    rows.append((_pack(cols), pk))
            if rows:
                cur.executemany("UPDATE ingest_sampletext SET data = %s WHERE id = %s", rows)


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0009_point_blocks'),
    ]

    operations = [
        migrations.RunPython(convert, migrations.RunPython.noop),
        migrations.RemoveIndex(model_name='sampletext', name='sampletext_raw'),
        migrations.RemoveField(model_name='sampletext', name='compressed'),
    ]
