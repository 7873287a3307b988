"""Storage: projects and tokens, runs and their environments, series and points, raw samples.

Points are the materialized per-step values of every series (trainer step keys and the derived
sample families), stored packed: one block per commit, folded into per-series chunks (see
ingest.core.pointstore); reads never touch raw samples. Raw samples are kept per (message,
step) as one compact columnar blob so a step's aggregates can be recomputed exactly and
samples inspected.
"""

from __future__ import annotations

from django.db import models


class Project(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Token(models.Model):
    """An ingest token; only its SHA-256 is stored."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tokens")
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True)
    revoked = models.BooleanField(default=False)


class Run(models.Model):
    """A run. `name` is what people see (unique in the project, renamable); `wire_name` is the
    name trainers address it by (the message's `run`): a new experiment under a name that already
    has data is a new run with the same wire name and a suffixed `name` (see ingest.write.runs)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    wire_name = models.CharField(max_length=200)
    started = models.BooleanField(default=False)  # a run.start opened it
    status = models.CharField(max_length=16, default="running")
    config = models.JSONField(null=True)
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    last_step = models.BigIntegerField(null=True)
    color = models.CharField(max_length=16, default="")
    notes = models.TextField(default="")
    total_steps = models.BigIntegerField(null=True)  # from run.start (progress and ETA)
    # Seconds per step, an exponentially weighted mean of the gaps between consecutive steps'
    # times (the first step, with its warm-up, has no gap), and the newest step's time.
    step_seconds = models.FloatField(null=True)
    last_step_time = models.FloatField(null=True)
    # The smallest step logged: progress counts steps from it when it is 1 (Hugging Face's
    # Trainer counts from 1), from 0 otherwise (ingest.core.progress).
    first_step = models.BigIntegerField(null=True)
    # When the run's trainer was last seen alive (epoch s): any message, a heartbeat, or an
    # open ingest connection that carried the run (refreshed while it stays open). A running
    # run not seen for TELESCOPE_CRASH_SECONDS is shown `crashed` (ingest.core.progress).
    last_seen = models.FloatField(null=True)
    # An observed range in use widened: every step is re-aggregated at this time (epoch s), at
    # most once per ingest.core.renormalize.DELAY_SECONDS however often it widens meanwhile.
    renormalize_at = models.FloatField(null=True)
    # Bumped by every commit that changes points; points carry the seq that last wrote them.
    seq = models.BigIntegerField(default=0)
    # The point store (ingest.core.pointstore): chunks hold every point with seq ≤ chunked_seq;
    # blocks with seq > replay_seq are kept; `uncompacted` points wait in blocks.
    chunked_seq = models.BigIntegerField(default=0, db_default=0)
    replay_seq = models.BigIntegerField(default=0, db_default=0)
    uncompacted = models.BigIntegerField(default=0, db_default=0)
    # Labels people give a run to group it (the run list filters by them): a sorted list of
    # distinct names, set with PATCH /api/runs/<id> (ingest.write.housekeeping.clean_tags).
    tags = models.JSONField(default=list, db_default=models.Value("[]"))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="run_unique_name")
        ]
        indexes = [models.Index(fields=["project", "wire_name", "id"], name="run_wire_name")]


class DeletedRun(models.Model):
    """A run that was deleted (its id, project and name), so its old URLs can say so."""

    id = models.BigIntegerField(primary_key=True)  # the deleted run's id
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="deleted_runs")
    name = models.CharField(max_length=200)
    deleted_at = models.DateTimeField()


class HealthProbe(models.Model):
    """One row `/healthz` writes to prove the database takes writes (ingest.write.health)."""

    id = models.IntegerField(primary_key=True)
    at = models.FloatField()


class RunIncarnation(models.Model):
    """A client's run attempt (`incarnation` on the wire), pinned to the run its `run.start`
    opened, so its messages (and their replays) reach that run and no other."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    uid = models.CharField(max_length=200)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="incarnations")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "uid"], name="incarnation_unique_uid")
        ]


class Environment(models.Model):
    """Declared ranges of one environment of a run (YAML `environments:` shape)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="environments")
    name = models.CharField(max_length=200)
    weight = models.FloatField(null=True)
    reward_min = models.FloatField(null=True)
    reward_max = models.FloatField(null=True)
    metrics_ranges = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "name"], name="environment_unique_name")
        ]


class ObservedRange(models.Model):
    """The lowest and highest value a run's kept samples had, per environment ('' = none) and
    reward / sample metric: the normalization range where none is declared (ingest.core.normalize).
    When it widens, the run's steps are re-aggregated."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="observed_ranges")
    env = models.CharField(max_length=200)
    kind = models.CharField(max_length=16)
    key = models.CharField(max_length=200)
    lo = models.FloatField()
    hi = models.FloatField()
    # The range when the run's steps were last normalized by it everywhere (first seen, or the
    # last re-normalization): a widening is significant by its growth since then, so creeps
    # that add up count (ingest.core.observed). Null (rows from before 0012): the previous range.
    base_lo = models.FloatField(null=True)
    base_hi = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "env", "kind", "key"],
                                               name="observed_unique")]


class IngestedMessage(models.Model):
    """Message ids already applied, so a resent message changes nothing."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE)
    msg_id = models.CharField(max_length=200)
    received_at = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "msg_id"], name="message_unique_id")
        ]


class Series(models.Model):
    """One chartable series: a trainer step key, or a derived (kind, key, stat, env)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="series")
    sid = models.CharField(max_length=700)  # the opaque public id, see ingest.core.series_ids
    kind = models.CharField(max_length=16)
    key = models.CharField(max_length=200)
    stat = models.CharField(max_length=48, null=True)
    env = models.CharField(max_length=200, null=True)
    nonfinite_count = models.BigIntegerField(default=0)
    # A step key whose values are strings: points hold codes into its SeriesCategory rows.
    categorical = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "sid"], name="series_unique_sid")]


class SeriesCategory(models.Model):
    """One value of a categorical series and its code (the float its points store)."""

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="categories")
    code = models.IntegerField()
    text = models.CharField(max_length=128)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["series", "code"], name="category_unique_code"),
            models.UniqueConstraint(fields=["series", "text"], name="category_unique_text"),
        ]


class PointBlock(models.Model):
    """The points one commit wrote to a run, packed (see ingest.core.pointstore): int64 series pks,
    int64 steps, float64 times, float64 values (NaN: withdrawn), little-endian, n of each."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False)
    seq = models.BigIntegerField()
    n = models.IntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="pointblock_seq")]


class SeriesChunk(models.Model):
    """Points of one series over steps first_step..last_step (at most pointstore.CHUNK_POINTS),
    folded from blocks by compaction: int64 steps, float64 times, float64 values."""

    series = models.ForeignKey(Series, on_delete=models.CASCADE, db_index=False)
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    n = models.IntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series", "first_step"],
                                               name="serieschunk_first_step")]
        indexes = [models.Index(fields=["series", "last_step"], name="serieschunk_last_step")]


class StepState(models.Model):
    """Per (run, step) bookkeeping for sample aggregation; its row is the lock that serializes
    recomputation of one step across server processes."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False)
    step = models.BigIntegerField()
    first_seen = models.FloatField()
    n_samples = models.BigIntegerField(default=0)
    # A batch arrival sets dirty and bumps version; the materializer clears dirty only if the
    # version it computed from is still current.
    dirty = models.BooleanField(default=False)
    # Dirty only because an observed range widened (ingest.core.renormalize): the step's samples are
    # unchanged, so only its normalized family is recomputed (and rewritten where it changed).
    norm_only = models.BooleanField(default=False, db_default=False)
    version = models.BigIntegerField(default=0)
    done_version = models.BigIntegerField(default=0)  # the version last aggregated (barrier)
    # What the step's last aggregation wrote: int64 pks of the series with a point here, their
    # float64 values and the points' time. The next aggregation writes only what differs.
    derived_series = models.BinaryField(default=b"")
    derived_values = models.BinaryField(default=b"")
    derived_time = models.FloatField(null=True)
    # A pipeline working on the step holds it until then (epoch seconds): with several server
    # processes each dirty step is aggregated by one; a claim of a dead process runs out.
    claimed_until = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "step"], name="stepstate_unique_step")
        ]
        indexes = [models.Index(fields=["dirty", "run"], name="stepstate_dirty")]


class SampleBatch(models.Model):
    """The samples of one message for one step, columnar (see ingest.core.columns)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False)
    step = models.BigIntegerField()
    msg_id = models.CharField(max_length=200)
    n = models.IntegerField()
    data = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["run", "step"], name="samplebatch_run_step")]


class SampleText(models.Model):
    """The `prompt` and `completion` texts of one message's samples of one step, in the order
    of its SampleBatch (see ingest.core.texts). Kept apart from the numeric columns so aggregation
    and series reads never load text. Packed and compressed in bulk (one blob per row) in the
    message's transaction. No database constraint on `run`: rows are removed with the run's
    other data."""

    run = models.ForeignKey(Run, on_delete=models.DO_NOTHING, db_index=False,
                            db_constraint=False)
    step = models.BigIntegerField()
    msg_id = models.CharField(max_length=200)
    n = models.IntegerField()
    nbytes = models.BigIntegerField()  # UTF-8 bytes of its texts (what the run limit counts)
    data = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["run", "step"], name="sampletext_run_step")]


class SampleTextUsage(models.Model):
    """UTF-8 bytes of sample text stored for a run, against TELESCOPE_MAX_TEXT_BYTES_PER_RUN."""

    run = models.OneToOneField(Run, on_delete=models.DO_NOTHING, primary_key=True,
                               db_constraint=False)
    nbytes = models.BigIntegerField(default=0)


class EventBatch(models.Model):
    """The events (spans and instants) of one message, columnar (ingest.core.eventstore):
    `t_lo` is their earliest start, `t_hi` their latest end (or an instant's time), so a
    window read loads only the batches it overlaps."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False)
    msg_id = models.CharField(max_length=200)
    n = models.IntegerField()
    t_lo = models.FloatField()
    t_hi = models.FloatField()
    data = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["run", "t_hi"], name="eventbatch_run_t_hi")]


class GaugeBatch(models.Model):
    """The gauge points (system metrics) of one message, columnar (ingest.core.eventstore),
    with the span of their times."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False)
    msg_id = models.CharField(max_length=200)
    n = models.IntegerField()
    t_lo = models.FloatField()
    t_hi = models.FloatField()
    data = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["run", "t_hi"], name="gaugebatch_run_t_hi")]


class TimelineState(models.Model):
    """A run's events at a glance, kept by every events message, and the bookkeeping of its
    derived `timing_*` series (ingest.pipeline.timeline): `version` is bumped by each events
    message (and a config change), `done_version` is the version they were last computed at."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True,
                               related_name="timeline")
    version = models.BigIntegerField(default=0)
    done_version = models.BigIntegerField(default=0)
    events = models.BigIntegerField(default=0)  # events stored
    first = models.FloatField(null=True)  # earliest event time
    last = models.FloatField(null=True)  # latest event time (a span's end, an instant's time)
    # Distinct [server, slot] of generation spans, servers of generation and weight_sync
    # spans, ranks of trainer spans (null is one): what the buckets divide by.
    lanes = models.JSONField(default=list)
    servers = models.JSONField(default=list)
    ranks = models.JSONField(default=list)
    gauges = models.BigIntegerField(default=0)  # gauge points stored
    gauge_first = models.FloatField(null=True)
    gauge_last = models.FloatField(null=True)
    # The points the last computation wrote: int64 series pks, int64 steps, float64 times,
    # float64 values, n of each, little-endian (the next one writes only what differs), the
    # last event batch they include and the lane count they divided by: the next computation
    # recomputes only the steps later batches touch (ingest.core.timeline_delta).
    derived = models.BinaryField(default=b"")
    done_batch = models.BigIntegerField(default=0, db_default=0)
    done_lanes = models.IntegerField(null=True)
