// @ts-check
// How far a run is, in words, pure: progress, ETA counting down between updates,
// steps per second, durations. The numbers come from the read API (ingest/progress.py): progress
// counts steps, not step numbers — `steps_done` of `total_steps` (a run whose first step is 1,
// as Hugging Face's Trainer counts, has done `last_step` steps; one from 0, `last_step + 1`).

/** Steps done: the server's `steps_done`; from `first_step` and `last_step` if it has none. */
export function stepsDone(info) {
  if (Number.isFinite(info.steps_done)) return info.steps_done;
  if (info.last_step === null || info.last_step === undefined) return 0;
  return info.first_step >= 1 ? info.last_step : info.last_step + 1;
}

/** {done, total, fraction}: fraction in [0, 1], null without a total. */
export function progressOf(info) {
  const done = stepsDone(info);
  const total = info.total_steps > 0 ? info.total_steps : null;
  return { done, total, fraction: total ? Math.min(1, done / total) : null };
}

/** "45 s", "12 min", "1 h 05 min", "3 d 4 h"; "" for no number. */
export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) {
    const h = Math.floor(s / 3600);
    return `${h} h ${String(Math.floor((s - h * 3600) / 60)).padStart(2, '0')} min`;
  }
  const d = Math.floor(s / 86400);
  return `${d} d ${Math.floor((s - d * 86400) / 3600)} h`;
}

/**
 * The ETA now: the server's `eta_seconds`, received at `receivedMs`, less the time since
 * (never below 0); null when the run has none (not running, no total, no step timing).
 */
export function etaNow(info, receivedMs, nowMs) {
  if (info.eta_seconds === null || info.eta_seconds === undefined || info.status !== 'running') return null;
  return Math.max(0, info.eta_seconds - Math.max(0, nowMs - receivedMs) / 1000);
}

/** Seconds per step of the recent steps: the newest `window` points of a step/time series. */
export function recentStepSeconds(steps, times, window = 20) {
  const n = Math.min(steps?.length ?? 0, times?.length ?? 0);
  if (n < 2) return null;
  const first = Math.max(0, n - window);
  const ds = steps[n - 1] - steps[first];
  const dt = times[n - 1] - times[first];
  return ds > 0 && dt > 0 ? dt / ds : null;
}

/**
 * Seconds per step: the server's (`step_seconds`, when it says), else what its ETA implies
 * (eta / steps left), else the recent series' pace (`recent`, from recentStepSeconds).
 */
export function stepSeconds(info, recent = null) {
  if (info.step_seconds > 0) return info.step_seconds;
  const { done, total } = progressOf(info);
  const left = total ? total - done : 0;
  if (info.eta_seconds > 0 && left > 0) return info.eta_seconds / left;
  return recent > 0 ? recent : null;
}

/** "3.2 steps/s", or for slow runs "0.05 steps/s (20 s per step)"; "" without a pace. */
export function rateText(secondsPerStep) {
  if (!(secondsPerStep > 0)) return '';
  const rate = 1 / secondsPerStep;
  const digits = rate >= 10 ? 0 : rate >= 1 ? 1 : 2;
  const text = `${rate.toFixed(digits)} steps/s`;
  return rate < 1 ? `${text} (${formatDuration(secondsPerStep)} per step)` : text;
}

/** "121 of 500 steps · 24%", "121 steps", or "no steps yet" (steps done, as stepsDone). */
export function progressText(info) {
  const { done, total, fraction } = progressOf(info);
  const n = (x) => x.toLocaleString('en-US');
  if (!done) return total ? `no steps yet of ${n(total)}` : 'no steps yet';
  if (!total) return `${n(done)} steps`;
  return `${n(done)} of ${n(total)} steps · ${Math.floor(fraction * 100)}%`;
}
