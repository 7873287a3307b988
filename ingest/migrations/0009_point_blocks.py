# Points move from one row each (ingest_point, plus ingest_seriessnapshot) to the point store of
# ingest.pointstore: one packed block per commit, folded into per-series chunks. Existing points
# are folded into chunks here (nothing is lost); their runs start with chunked_seq = seq.

import django.db.models.deletion
import numpy as np
from django.db import migrations, models

CHUNK_POINTS = 4096  # as ingest.pointstore.CHUNK_POINTS (a migration keeps its own copy)


def fold_points(apps, schema_editor):
    conn = schema_editor.connection
    with conn.cursor() as cur:
        cur.execute("SELECT id, seq FROM ingest_run")
        runs = cur.fetchall()
        for run_id, seq in runs:
            cur.execute("SELECT series_id, step, time, value FROM ingest_point WHERE run_id = %s"
                        " AND value IS NOT NULL ORDER BY series_id, step", [run_id])
            rows = cur.fetchall()
            if rows:
                table = np.array(rows, dtype=np.float64)
                pk = table[:, 0].astype(np.int64)
                cuts = np.flatnonzero(np.diff(pk)) + 1
                chunks = []
                for part in np.split(np.arange(pk.size), cuts):
                    for a in range(0, part.size, CHUNK_POINTS):
                        idx = part[a:a + CHUNK_POINTS]
                        step = np.array([rows[i][1] for i in idx], dtype="<i8")  # exact int64
                        data = (step.tobytes() + table[idx, 2].astype("<f8").tobytes()
                                + table[idx, 3].astype("<f8").tobytes())
                        chunks.append((int(pk[idx[0]]), int(step[0]), int(step[-1]),
                                       int(idx.size), data))
                cur.executemany("INSERT INTO ingest_serieschunk (series_id, first_step, last_step,"
                                " n, data) VALUES (%s, %s, %s, %s, %s)", chunks)
            cur.execute("UPDATE ingest_run SET chunked_seq = %s, replay_seq = %s WHERE id = %s",
                        [seq, seq, run_id])


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0008_sample_text'),
    ]

    operations = [
        migrations.CreateModel(
            name='PointBlock',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.BigIntegerField()),
                ('n', models.IntegerField()),
                ('data', models.BinaryField()),
                ('run', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='ingest.run')),
            ],
        ),
        migrations.CreateModel(
            name='SeriesChunk',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('first_step', models.BigIntegerField()),
                ('last_step', models.BigIntegerField()),
                ('n', models.IntegerField()),
                ('data', models.BinaryField()),
                ('series', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='ingest.series')),
            ],
        ),
        migrations.AddConstraint(
            model_name='pointblock',
            constraint=models.UniqueConstraint(fields=('run', 'seq'), name='pointblock_seq'),
        ),
        migrations.AddIndex(
            model_name='serieschunk',
            index=models.Index(fields=['series', 'last_step'], name='serieschunk_last_step'),
        ),
        migrations.AddConstraint(
            model_name='serieschunk',
            constraint=models.UniqueConstraint(fields=('series', 'first_step'), name='serieschunk_first_step'),
        ),
        migrations.AddField(
            model_name='run',
            name='chunked_seq',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='run',
            name='replay_seq',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='run',
            name='uncompacted',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.RunPython(fold_points, migrations.RunPython.noop),
        migrations.RemoveIndex(
            model_name='series',
            name='series_run_pending',
        ),
        migrations.RemoveField(
            model_name='series',
            name='pending',
        ),
        migrations.DeleteModel(
            name='Point',
        ),
        migrations.DeleteModel(
            name='SeriesSnapshot',
        ),
    ]
