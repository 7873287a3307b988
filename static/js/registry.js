// The metric registry (issue 10, item 3): a human title, a one-line description, a unit and the
// aggregation rule of common step keys, from the seeds' references (../shared/spec/: Telescope's
// step metrics and timing keys, the posttrain GRPO / PPO / DPO / optimizer keys). Data, not code
// paths: a chart asks `describe(key)` and shows its title with a "?" tooltip; an unknown key
// keeps its key as the title.

const KEYS = {
  entropy: ['Entropy', 'Policy entropy over masked token positions', 'nats', 'token mean'],
  kl_divergence_inference: ['KL to rollout policy', 'KL divergence between the current policy and the rollout (vLLM) policy', 'nats', ''],
  grad_norm: ['Gradient norm', 'Total gradient norm, before clipping', '', 'last chunk of the window'],
  learning_rate: ['Learning rate', 'Learning rate the scheduler set for this update', '', 'plain mean'],
  clip_frac: ['Clip fraction', 'Fraction of tokens where the clip bound limited the update; exactly 0 when n_mini == 1', '', 'token-weighted'],
  clip_fraction: ['Clip fraction', 'PPO policy clipping rate', '', 'token-weighted'],
  ratio_absdev: ['Ratio |dev|', 'Mean absolute deviation of the importance ratio from 1; exactly 0 when n_mini == 1', '', 'token-weighted'],
  seq_clip_frac: ['Sequence clip fraction', 'Fraction of responses the clip touched (GSPO, sequence level)', '', 'sequence-weighted'],
  kl_mean: ['KL to reference (mean)', 'Token mean of the K3 penalty toward the frozen reference; 0 without one', 'nats', 'token-weighted'],
  kl_max: ['KL to reference (max)', 'Largest per-token K3 penalty; far above kl_mean with a grad_norm jump: one token owns the step', 'nats', 'max over ranks'],
  kl_beta: ['KL β', 'The configured KL anchor strength, echoed', '', 'constant'],
  loss_avg: ['Loss', 'The objective\u2019s reduced loss', '', 'weighted by weight_sum (GRPO, OPD)'],
  weight_sum: ['Weight sum', 'The global valid-unit divisor the objective normalized by', '', 'sum'],
  valid_sequence_count: ['Valid sequences', 'Sequences that carried learnable signal', 'sequences', 'sum'],
  valid_token_count: ['Valid tokens', 'Completion tokens that carried learnable signal', 'tokens', 'sum'],
  response_len_mean: ['Response length (mean)', 'Mean generated length of the completions', 'tokens', 'weighted by response_count'],
  response_len_max: ['Response length (max)', 'Longest completion of the step; at max_tokens whenever something was cut', 'tokens', 'max over ranks'],
  rollout_truncated_frac: ['Truncated fraction', 'Fraction of completions cut at the token budget', '', 'weighted by response_count'],
  grpo_informative_group_count: ['Informative groups', 'Groups whose rewards were not all equal; near 0 means the reward does not discriminate', 'groups', 'sum'],
  grpo_tied_group_count: ['Tied groups', 'Groups whose rewards all tied (zero advantage)', 'groups', 'sum'],
  grpo_group_count: ['Groups scored', 'Prompt groups scored this step', 'groups', 'sum'],
  dpo_accuracy: ['DPO accuracy', 'Fraction of pairs the policy ranks correctly; starts near 0.5 and should rise', '', 'mean'],
  dpo_reward_margin: ['DPO reward margin', 'Implicit reward gap between winner and loser', '', 'mean'],
  'loss/policy': ['Policy loss', 'The policy-gradient term of the loss', '', ''],
  'loss/kl': ['KL loss', 'The KL penalty term of the loss', '', ''],
  'loss/total': ['Total loss', 'The loss the optimizer stepped on', '', ''],
  'optim/update_outcome': ['Update outcome', 'applied, skipped (see skip_reason), accumulating or discarded', '', 'per attempt'],
  'optim/step_skipped': ['Step skipped', 'Whether this update attempt was skipped', '', 'per attempt'],
  'optim/skip_reason': ['Skip reason', 'nonfinite_loss or nonfinite_gradient', '', 'per attempt'],
  'optim/zero_grad_skips_total': ['Zero-gradient skips', 'Updates skipped because the gradient was exactly zero; rising is expected in GRPO', 'updates', 'cumulative'],
  'optim/nonfinite_skips_total': ['Non-finite skips', 'Updates rejected for a non-finite loss or gradient', 'updates', 'cumulative'],
};

/** Timeline keys: `timing_<op>_total` (total time per step) or `timing_<op>_microbatch_mean`. */
const TIMING_OPS = {
  step: 'Training step', step_active: 'Active step', forward: 'Forward pass', backward: 'Backward pass',
  loss_computation: 'Loss computation', compute_kl: 'KL computation', compute_entropy: 'Entropy computation',
  data_to_device: 'Data to device', prepare_tensors: 'Tensor preparation', waiting_for_data: 'Waiting for data',
  weight_sync_trainer: 'Weight sync (trainer)', weight_sync_inference: 'Weight sync (inference)',
};

function entry(values) {
  const [title, description, unit, aggregation] = values;
  return { title, description, unit, aggregation };
}

function timing(key) {
  const m = /^timing_(.+?)(_total|_microbatch_mean)?$/.exec(key);
  if (!m) return null;
  const op = m[1] === 'step' && !m[2] ? null : m[1];
  const name = TIMING_OPS[op ?? m[1]];
  if (!name) return null;
  const micro = m[2] === '_microbatch_mean';
  return { title: micro ? `${name} (per microbatch)` : name,
    description: micro ? `Mean time of one microbatch's ${name.toLowerCase()}` : `Total time of ${name.toLowerCase()} per step`,
    unit: 's', aggregation: micro ? 'mean over microbatches' : 'per step' };
}

/**
 * What the registry knows of a step key: {title, description, unit, aggregation} or null.
 * `train/` and `val/` prefixes name the phase; `val/` says so in the title.
 */
export function describe(key) {
  if (typeof key !== 'string') return null;
  if (Object.hasOwn(KEYS, key)) return entry(KEYS[key]);
  const phase = /^(train|val)\/(.+)$/.exec(key);
  if (phase && Object.hasOwn(KEYS, phase[2])) {
    const found = entry(KEYS[phase[2]]);
    if (phase[1] === 'val') found.title = `${found.title} (validation)`;
    return found;
  }
  return timing(key);
}

/** The "?" tooltip of a described key: description, then unit and aggregation, then the key. */
export function tooltip(key, info) {
  const facts = [info.unit && `unit: ${info.unit}`, info.aggregation && `aggregation: ${info.aggregation}`].filter(Boolean);
  return [info.description, facts.join(' · '), `key: ${key}`].filter(Boolean).join('\n');
}
