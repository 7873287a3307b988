// @ts-check
// The metric registry, data rather than code: one table of plain records, one per key of the seeds'
// references (../shared/spec/telescope-metrics.md: step metrics and timing keys;
// posttrain-metrics-reference.md: shared, GRPO, reward and grouping, PPO, DPO, OPD, NFT, flow-BC,
// optimizer outcome and validation keys; docs/integrations.md: TRL's `profiling/<name>` timers
// and the nested `train_step/<op>` spans' timing names): a human title, a one-line description,
// a unit, the aggregation rule, and the health hints the seeds establish (evaluated by
// charts/health.js). Data, not code paths: the lookup below is the only logic. A chart asks `describe(key)` for its title and
// "?" tooltip; an unknown key keeps its key as the title. The server's derived families (reward,
// sample metrics, advantage, groups, rollouts, discarded, ranges) are words too, at the end
// (`describeSeries(entry)`: title, "?", unit, whether the series counts).
//
// Keys are written as the seeds publish them. A `val/` key also finds its `train/` record (same
// leaf, validation phase: "(validation)" in the title); a bare key finds its `train/` record and
// a `train/` key its bare one. A `{name}` in a key is a variable part (a pattern entry); `vars`
// lists its allowed values with their words, else any `[A-Za-z0-9_]+` is taken as written.
//
// Hints: {rule, ...parameters, message}. Rules (charts/health.js): `nonzero-when-config`,
// `near-zero`, `ratio-with-jump`, `increases`, `last-above`, `sustained-above`, `equals`, `trend`. `refs` name the
// other keys a rule reads, as leaves resolved under the key's own phase (`train/kl_max` reads
// `train/kl_mean`). `{word}` in a message is filled with what the rule found.

const TOKEN_W = 'token-weighted (by valid_token_count)';
const SUM = 'sum over ranks and chunks';
const MAX = 'max over ranks and chunks';
const MEAN = 'plain mean';
const BY_RESPONSES = 'weighted by response_count';
const BY_SEQUENCES = 'weighted by valid_sequence_count';
const BY_GAP = 'weighted by logprob_gap_token_count';
const BY_SC = 'weighted by sc_token_count';
const PPO_DP = 'reduced across the policy model-DP world';
const REPORT = 'per step, from the reward reporter';
const ATTEMPT = 'per update attempt';

/** Timeline operations: `timing_<op>_total`, `timing_<op>_microbatch_mean`. */
const OPS = {
  forward: 'Forward pass', backward: 'Backward pass', loss_computation: 'Loss computation',
  compute_kl: 'KL computation', compute_entropy: 'Entropy computation', data_to_device: 'Data to device',
  prepare_tensors: 'Tensor preparation', weight_sync_trainer: 'Weight sync (trainer)',
  weight_sync_inference: 'Weight sync (inference)', optimizer_step: 'Optimizer step', weight_broadcast: 'Weight broadcast',
};
const MICRO_OPS = { step: 'Training step', ...OPS, step_active: 'Active step', waiting_for_data: 'Waiting for data' };
/** The span a trainer nests its passes in (TRL's and the demo's): `timing_<span>/<op>_total`. */
const SPANS = { train_step: 'train_step' };
/** TRL's profiled blocks (trainer_hooks/integrations/hf_timeline.py): `profiling/<name>`. */
const TRL_BLOCKS = {
  _prepare_inputs: 'Preparing inputs', 'transformers.generate': 'Generation (transformers)',
  'transformers.generate_batch': 'Generation (transformers, batched)', 'vLLM.generate': 'Generation (vLLM)',
  sync_weights: 'Weight sync to vLLM', _move_model_to_vllm: 'Moving weights to vLLM',
  _calculate_rewards: 'Reward computation', _get_per_token_logps_and_entropies: 'Per-token logprobs and entropies',
  compute_loss: 'Loss computation',
};
const PROFILED = 'mean seconds per call since the previous log (main process)';
const profiled = (name, title) => ({ key: `profiling/${name}`, title: `TRL: ${title}`, unit: 's',
  aggregation: PROFILED, description: `Mean seconds per call of TRL\u2019s profiled block ${name}` });
/** Statuses of the inference window's shares: `timing_generation_<status>_pct`, `timing_compute_reward_<status>_pct`. */
const GEN_STATUSES = { normal: 'normal', discarded: 'discarded', canceled: 'canceled', all: 'all statuses' };
const REWARD_STATUSES = { normal: 'normal', discarded: 'discarded', all: 'all statuses' };
const WINDOW = 'per inference window (between two save_batch events)';
/** A share of the training step above `threshold` at each of the last 3 steps that have both. */
const SHARE_OF_STEP = (threshold, message) => ({ rule: 'sustained-above', threshold, window: 3,
  refs: { of: 'timing_step_total' }, message });
const WEIGHT_SYNC_SLOW = SHARE_OF_STEP(0.25, 'Weight sync took {pct}% of step {step} ({value} s of {of} s), over 25% '
  + 'at each of the last {window} steps with one: the trainer and inference stall on it; sync less often or faster');
const SIDES = { pol_w: 'policy, winner', ref_w: 'reference, winner', pol_l: 'policy, loser', ref_l: 'reference, loser' };

const N_MINI_ZERO = {
  rule: 'nonzero-when-config', config: ['n_mini', 'rl.n_mini'], equals: 1,
  message: 'Not 0 at step {step} with n_mini == 1: with one optimizer step per batch the ratio is exactly 1 and nothing clips, so a nonzero value is a bug, not tighter training',
};
const RISING = (what) => ({ rule: 'trend', direction: 'up', window: 10, factor: 2, message: `Rising (mean {first} → {last} over the first and last 10 steps): ${what}` });

export const RECORDS = [
  // Telescope's default step metrics
  { key: 'entropy', title: 'Entropy', unit: 'nats', aggregation: 'token mean',
    description: 'Policy entropy, averaged over the trained (masked) token positions' },
  { key: 'kl_divergence_inference', title: 'KL to rollout policy', unit: 'nats', aggregation: 'per step, as the trainer reports it',
    description: 'How far the trained policy has moved from the policy that sampled the rollouts, from the inference engine\u2019s logprobs' },
  { key: 'grad_norm', title: 'Gradient norm', unit: '', aggregation: 'mean over minibatch groups',
    description: 'Norm of the gradient, averaged over the step\u2019s minibatch groups' },
  { key: 'learning_rate', title: 'Learning rate', unit: '', aggregation: 'current value of the scheduler',
    description: 'The learning rate the scheduler set for this step' },
  // Telescope's rollout metrics (derived from samples; described too when a trainer logs them)
  { key: 'stop_reason_length_pct', title: 'Stopped at length limit', unit: '%', aggregation: '100 × samples stopped for length / samples',
    description: 'Share of samples that ran into the token limit; a high share hints that max_token_len is too low' },
  { key: 'group_length_gini_mean', title: 'Length inequality in groups', unit: '', aggregation: 'mean over prompt groups',
    description: 'Gini of completion lengths inside each prompt group, averaged over groups' },
  { key: 'group_length_max_median_ratio_mean', title: 'Longest / median length', unit: 'ratio', aggregation: 'mean over prompt groups',
    description: 'Longest over median completion length per prompt group, averaged: a straggler gauge, near 1 when lengths are even' },
  // Telescope's timeline
  { key: 'timing_step_total', title: 'Training step', unit: 's', aggregation: 'per step',
    description: 'Wall time of one whole training step' },
  { key: 'timing_step_active', title: 'Active step', unit: 's', aggregation: 'per step',
    description: 'Time of the step spent working, i.e. without waiting for data' },
  { key: 'timing_waiting_for_data', title: 'Waiting for data', unit: 's', aggregation: 'per step',
    hints: [SHARE_OF_STEP(0.5, 'Waiting for data {pct}% of step {step} ({value} s of {of} s), over half of each '
      + 'of the last {window} steps: the trainer idles while inference generates; inference is the bottleneck')],
    description: 'Time the trainer waited for rollout data' },
  { key: 'timing_weight_sync_trainer_total', title: 'Weight sync (trainer)', unit: 's', aggregation: 'per step',
    hints: [WEIGHT_SYNC_SLOW], description: 'Total time spent on weight sync (trainer) in one training step' },
  { key: 'timing_weight_sync_inference_total', title: 'Weight sync (inference)', unit: 's', aggregation: 'per step',
    hints: [WEIGHT_SYNC_SLOW], description: 'Total time spent on weight sync (inference) in one training step' },
  { key: 'timing_{op}_total', vars: { op: OPS }, title: '{op}', unit: 's', aggregation: 'per step',
    description: 'Total time spent on {op:lower} in one training step' },
  { key: 'timing_microbatch_count', title: 'Microbatches', unit: 'microbatches', aggregation: 'most on one rank',
    description: 'Forward passes of the step on its busiest rank: how many microbatches it was cut into' },
  { key: 'timing_rank_spread', title: 'Rank spread (slowest / median)', unit: 'ratio', aggregation: 'per step, over ranks',
    hints: [{ rule: 'sustained-above', threshold: 1.5, window: 3, refs: { rank: 'timing_slowest_rank' },
      message: 'Rank {rank} is a straggler: it worked {value}× the median rank\u2019s time at step {step}, over 1.5× '
        + 'at each of the last {window} steps: every other rank waits for it at each collective' }],
    description: 'The busiest rank\u2019s working time in the step over the median rank\u2019s: 1 when the ranks are even' },
  { key: 'timing_slowest_rank', title: 'Slowest rank', unit: 'rank', aggregation: 'per step',
    description: 'The rank that worked longest in the step (the lowest one on ties): the one the others waited for' },
  { key: 'timing_generation_{status}_pct', vars: { status: GEN_STATUSES }, title: 'Generating ({status})', unit: '%',
    aggregation: WINDOW, description: 'Share of the inference lanes\u2019 time in the step\u2019s window spent on generations ({status})' },
  { key: 'timing_compute_reward_{status}_pct', vars: { status: REWARD_STATUSES }, title: 'Computing rewards ({status})',
    unit: '%', aggregation: WINDOW,
    description: 'Share of the inference lanes\u2019 time in the step\u2019s window spent computing rewards ({status}, canceled left out)' },
  { key: 'timing_idle_pct', title: 'Inference idle', unit: '%', aggregation: WINDOW,
    hints: [{ rule: 'sustained-above', threshold: 50, window: 3,
      message: 'Inference idle {value}% of the window of step {step}, over 50% in each of the last {window} steps: '
        + 'the lanes wait for the trainer (a slow step or weight sync, or more lanes than it can feed)' }],
    description: 'Share of the inference lanes\u2019 time in the step\u2019s window spent neither generating nor computing rewards' },
  { key: 'timing_avg_inference_time', title: 'Generation time (mean)', unit: 's', aggregation: 'mean over the window\u2019s generations',
    description: 'Mean duration of the generations that ended in the step\u2019s window (canceled ones left out)' },
  { key: 'timing_avg_compute_reward_time', title: 'Reward computation time (mean)', unit: 's',
    aggregation: 'mean over the window\u2019s reward computations',
    description: 'Mean duration of the reward computations that ended in the step\u2019s window (canceled and empty ones left out)' },
  { key: 'timing_{op}_microbatch_mean', vars: { op: MICRO_OPS }, title: '{op} (per microbatch)', unit: 's',
    aggregation: 'mean over microbatches', description: 'Time of {op:lower}, averaged over the step\u2019s microbatches' },
  { key: 'timing_{span}_total', vars: { span: SPANS }, title: 'Forward and backward ({span})', unit: 's',
    aggregation: 'per step', description: 'Total time of the trainer\u2019s {span} spans (its microbatches\u2019 passes) in one training step' },
  { key: 'timing_{span}_microbatch_mean', vars: { span: SPANS }, title: 'Forward and backward ({span}, mean span)', unit: 's',
    aggregation: 'mean over the step\u2019s spans', description: 'Time of one {span} span, averaged over the step\u2019s spans on every rank' },
  { key: 'timing_{span}/{op}_total', vars: { span: SPANS, op: OPS }, title: '{op} (in {span})', unit: 's',
    aggregation: 'per step', description: 'Total time spent on {op:lower} inside the trainer\u2019s {span} spans in one training step' },
  { key: 'timing_{span}/{op}_microbatch_mean', vars: { span: SPANS, op: OPS }, title: '{op} (in {span}, per microbatch)',
    unit: 's', aggregation: 'mean over microbatches',
    description: 'Time of {op:lower} inside the trainer\u2019s {span} spans, averaged over the step\u2019s microbatches' },
  // TRL's profiling timers (trainer_hooks' TelescopeCallback): known blocks, then a reward function's
  ...Object.entries(TRL_BLOCKS).map(([name, title]) => profiled(name, title)),
  { key: 'profiling/{name}', title: 'TRL: {name}', unit: 's', aggregation: PROFILED,
    description: 'Mean seconds per call of TRL\u2019s profiled block {name} (a reward function\u2019s, when TRL names it so)' },
  // Key naming examples of the Telescope docs and the design
  { key: 'loss/policy', title: 'Policy loss', unit: '', aggregation: 'as the trainer reports it', description: 'The policy-gradient part of the loss' },
  { key: 'loss/kl', title: 'KL loss', unit: '', aggregation: 'as the trainer reports it', description: 'The KL-penalty part of the loss' },
  { key: 'loss/total', title: 'Total loss', unit: '', aggregation: 'as the trainer reports it', description: 'The whole loss the optimizer stepped on' },

  // posttrain: shared across algorithms
  { key: 'train/loss_avg', title: 'Loss', unit: '', aggregation: 'weighted by weight_sum (GRPO, OPD); plain mean (DPO, NFT, flow-BC)',
    description: 'The objective\u2019s reduced loss (flow-BC: masked flow-matching loss rescaled to the global masked mean); PPO reports its policy and critic losses instead' },
  { key: 'train/weight_sum', title: 'Weight sum', unit: '', aggregation: SUM,
    description: 'Number of valid units, over all data-parallel ranks, the objective divided its loss by' },
  { key: 'train/valid_sequence_count', title: 'Valid sequences', unit: 'sequences', aggregation: SUM,
    description: 'Sequences that carried a learning signal (cut completions excluded under the truncation mask)' },
  { key: 'train/valid_token_count', title: 'Valid tokens', unit: 'tokens', aggregation: SUM,
    description: 'Completion tokens that carried a learning signal' },
  { key: 'train/grad_norm', title: 'Gradient norm', unit: '', aggregation: 'last chunk of the window',
    description: 'Total gradient norm before clipping, the figure compared with max_grad_norm' },
  { key: 'train/learning_rate', title: 'Learning rate', unit: '', aggregation: MEAN, description: 'The learning rate of the applied update' },
  { key: 'timer/e2e_step_s', title: 'End-to-end step time', unit: 's', aggregation: MEAN,
    description: 'Wall time to go through one collected batch, start to finish' },

  // posttrain: GRPO
  { key: 'train/clip_frac', title: 'Clip fraction', unit: 'fraction', aggregation: TOKEN_W, hints: [N_MINI_ZERO],
    description: 'Share of tokens whose update the epsilon clip bounded; exactly 0 when n_mini == 1' },
  { key: 'train/ratio_absdev', title: 'Ratio |deviation|', unit: '', aggregation: 'token-weighted', hints: [N_MINI_ZERO],
    description: 'Mean distance of the importance ratio from 1; exactly 0 when n_mini == 1' },
  { key: 'train/seq_clip_frac', title: 'Sequence clip fraction', unit: 'fraction', aggregation: BY_SEQUENCES,
    description: 'Share of responses the clip touched: the sequence-level (GSPO) counterpart of the clip fraction' },
  { key: 'train/seq_log_ratio_abs', title: 'Sequence |log ratio|', unit: 'nats', aggregation: BY_SEQUENCES,
    description: 'Mean absolute log importance ratio of a whole response' },
  { key: 'train/routing_replay_pinned_tokens', title: 'Routing replay: pinned tokens', unit: 'tokens', aggregation: SUM,
    description: 'Token positions sent through the pinned MoE routing (rl.routing_replay=rollout only)' },
  { key: 'train/routing_replay_pinned_blocks', title: 'Routing replay: pinned blocks', unit: 'blocks', aggregation: MEAN,
    description: 'Sparse-MoE blocks pinned per token, a constant of the model' },
  { key: 'train/logprob_gap_mean', title: 'Train–rollout logprob gap', unit: 'nats', aggregation: BY_GAP,
    hints: [RISING('on an MoE policy this is the routing-flip collapse signature; on a dense model the gap is only numeric noise')],
    description: 'Mean |log π_train − log π_rollout| per compared token: how much the training forward disagrees with the rollout engine' },
  { key: 'train/mean_rank_logprob_gap_p99', title: 'Logprob gap p99 (rank mean)', unit: 'nats', aggregation: BY_GAP,
    description: '99th percentile of the per-token gap on each rank and chunk, then averaged, since quantiles do not combine' },
  { key: 'train/logprob_gap_gt0p5_frac', title: 'Logprob gap > 0.5 nats', unit: 'fraction', aggregation: BY_GAP,
    description: 'Share of compared tokens whose train–rollout gap exceeds 0.5 nats' },
  { key: 'train/logprob_gap_token_count', title: 'Logprob gap tokens', unit: 'tokens', aggregation: SUM,
    description: 'Tokens the gap was measured on; 0 means no rollout logprobs were recorded, so the gap keys read 0 for lack of data' },
  { key: 'train/kl_mean', title: 'KL to reference (mean)', unit: 'nats', aggregation: TOKEN_W,
    hints: [{ rule: 'nonzero-when-config', config: ['kl_beta', 'rl.kl_beta'], equals: 0,
      message: 'Not 0 at step {step} although kl_beta is 0: without a reference the penalty is exactly 0 by construction' }],
    description: 'Token mean of the K3 penalty toward the frozen reference; exactly 0 without one (rl.kl_beta = 0)' },
  { key: 'train/kl_max', title: 'KL to reference (max)', unit: 'nats', aggregation: MAX,
    hints: [{ rule: 'ratio-with-jump', refs: { mean: 'kl_mean', jump: 'grad_norm' }, ratio: 100, factor: 3, lookback: 10, prior: 3,
      message: 'Step {step}: kl_max is {ratio}× kl_mean while grad_norm jumped {jump}× its recent median: one token owns the step (what rl.kl_coeff_clamp is for)' }],
    description: 'Largest per-token K3 penalty of the batch; far above the mean together with a grad-norm jump, one token owns the step' },
  { key: 'train/kl_beta', title: 'KL β', unit: '', aggregation: 'plain mean (a constant)',
    description: 'The configured KL anchor strength (rl.kl_beta), echoed to label the curve' },
  { key: 'train/response_count', title: 'Responses', unit: 'completions', aggregation: SUM,
    description: 'Completions handed to the objective, counted before empty or masked truncated ones are dropped' },
  { key: 'train/rollout_truncated_frac', title: 'Truncated fraction', unit: 'fraction', aggregation: BY_RESPONSES,
    hints: [RISING('responses are running into rollout.max_tokens; each cut completion is scored on an unfinished answer')],
    description: 'Share of completions the rollout engine cut at its token budget; 0 when the rollout stamps no finish reason' },
  { key: 'train/response_len_mean', title: 'Response length (mean)', unit: 'tokens', aggregation: BY_RESPONSES,
    description: 'Average generated length of the completions' },
  { key: 'train/response_len_max', title: 'Response length (max)', unit: 'tokens', aggregation: MAX,
    description: 'Longest completion of the step; it sits at rollout.max_tokens whenever something was cut' },
  { key: 'train/sc_token_count', title: 'Score centering: tokens', unit: 'tokens', aggregation: SUM,
    description: 'Completion tokens the score-centering correction covered; 0 when centering is off' },
  { key: 'train/sc_head_mass_q', title: 'Score centering: sampler head mass', unit: 'fraction', aggregation: BY_SC,
    description: 'Probability mass the sampler puts in its own top-k head, on average (the reference reports ≥ 0.99 at k = 128)' },
  { key: 'train/sc_head_mass_p', title: 'Score centering: trainer head mass', unit: 'fraction', aggregation: BY_SC,
    description: 'Probability mass the trainer puts in the sampler\u2019s top-k head, on average' },
  { key: 'train/sc_rho_mean', title: 'Score centering: tail ratio (mean)', unit: 'ratio', aggregation: BY_SC,
    description: 'Token mean of the sampler-over-trainer tail-mass ratio; 1 when the two agree' },
  { key: 'train/sc_rho_max', title: 'Score centering: tail ratio (max)', unit: 'ratio', aggregation: MAX,
    description: 'Largest tail-mass ratio of the step; large means a confident trainer against an unsure sampler' },
  { key: 'train/sc_kl_head', title: 'Score centering: head KL', unit: 'nats', aggregation: BY_SC,
    description: 'Sampler-vs-trainer divergence on the head at the same temperature: the mismatch the correction removes' },
  { key: 'train/sc_correction_abs', title: 'Score centering: |correction|', unit: '', aggregation: BY_SC,
    description: 'Token mean of the absolute correction term; exactly 0 when sampler and trainer agree' },
  { key: 'train/sc_token_weight', title: 'Score centering: token weight', unit: '', aggregation: BY_SC,
    description: 'Token mean of the weight on the sampled token; exactly 1 under compose=none' },
  { key: 'train/sc_out_of_head_frac', title: 'Score centering: out-of-head tokens', unit: 'fraction', aggregation: BY_SC,
    description: 'Share of sampled tokens outside the sampler\u2019s own top-k head' },

  // posttrain: reward and grouping (GRPO reporting path); PPO and NFT publish reward_mean too
  { key: 'train/reward_mean', title: 'Reward mean', unit: '', aggregation: 'sample-weighted (PPO: over valid action tokens)',
    description: 'Average reward of the batch\u2019s samples' },
  { key: 'train/reward_std', title: 'Reward std', unit: '', aggregation: 'sample-weighted', description: 'Spread of the batch\u2019s rewards' },
  { key: 'train/reward_min', title: 'Reward min', unit: '', aggregation: 'sample-weighted', description: 'Lowest reward of the batch' },
  { key: 'train/reward_max', title: 'Reward max', unit: '', aggregation: 'sample-weighted', description: 'Highest reward of the batch' },
  { key: 'train/rollout_count', title: 'Rollouts scored', unit: 'trajectories', aggregation: REPORT, description: 'Trajectories scored this step' },
  { key: 'train/grpo_group_count', title: 'Groups scored', unit: 'groups', aggregation: REPORT,
    description: 'Prompt groups scored this step; with dynamic sampling, every draw of the step, trained on or not' },
  { key: 'train/grpo_informative_group_count', title: 'Informative groups', unit: 'groups', aggregation: REPORT,
    hints: [{ rule: 'near-zero', refs: { total: 'grpo_group_count' }, window: 5, fraction: 0.05,
      message: 'Near 0 for the last {window} steps ({value} at step {step}): the reward does not discriminate between samples, so tied groups give no gradient — a data or reward problem, not an optimizer one' }],
    description: 'Groups whose rewards were not all equal, the only ones with a nonzero advantage; near 0, the reward does not discriminate' },
  { key: 'train/grpo_tied_group_count', title: 'Tied groups', unit: 'groups', aggregation: REPORT,
    description: 'Groups whose rewards all tied, so every member\u2019s advantage is zero' },
  { key: 'train/grpo_all_zero_group_count', title: 'All-zero groups', unit: 'groups', aggregation: REPORT, description: 'Groups in which every sample scored 0' },
  { key: 'train/grpo_all_one_group_count', title: 'All-one groups', unit: 'groups', aggregation: REPORT, description: 'Groups in which every sample scored 1' },
  { key: 'train/grpo_dynamic_sampling_extra_rollouts', title: 'Dynamic sampling: extra rounds', unit: 'rounds', aggregation: REPORT,
    description: 'Refill rounds spent topping up informative groups (dynamic sampling only)' },
  { key: 'train/grpo_dynamic_sampling_refill_dispatches', title: 'Dynamic sampling: refill dispatches', unit: 'calls', aggregation: REPORT,
    description: 'Generation calls beyond the base draw (dynamic sampling only)' },
  { key: 'train/grpo_dynamic_sampling_idle_cells', title: 'Dynamic sampling: idle cells', unit: 'cells', aggregation: REPORT,
    description: 'Cells left idle on purpose across the refill rounds; 0 in the default mode' },
  { key: 'train/grpo_dynamic_sampling_batch_informative_groups', title: 'Dynamic sampling: informative groups trained', unit: 'groups',
    aggregation: REPORT, description: 'Informative groups in the trained batch, to compare with the quota' },
  { key: 'train/grpo_dynamic_sampling_avoided_prompts', title: 'Dynamic sampling: avoided prompts', unit: 'prompts', aggregation: REPORT,
    description: 'Prompt draws that selective refills skipped (work avoided, not time measured)' },
  { key: 'train/grpo_dynamic_sampling_dropped_trajectories', title: 'Dynamic sampling: dropped trajectories', unit: 'trajectories',
    aggregation: REPORT, description: 'Scored trajectories collected but not trained on (tied groups first, then surplus informative ones)' },

  // posttrain: PPO (one frame per outer iteration; policy keys absent on critic warm-up)
  { key: 'train/policy_total_loss', title: 'Policy loss (total)', unit: '', aggregation: 'token-weighted', description: 'The policy\u2019s whole loss' },
  { key: 'train/policy_loss', title: 'Policy loss', unit: '', aggregation: 'token-weighted (PPO); plain mean (NFT)',
    description: 'The policy term of the loss: PPO\u2019s clipped surrogate, or NFT\u2019s policy component' },
  { key: 'train/clip_fraction', title: 'Clip fraction (PPO)', unit: 'fraction', aggregation: 'token-weighted',
    description: 'Share of tokens where PPO\u2019s policy clip was active' },
  { key: 'train/ratio_mean', title: 'Importance ratio (mean)', unit: 'ratio', aggregation: 'token-weighted', description: 'Average policy-over-behaviour probability ratio' },
  { key: 'train/entropy', title: 'Entropy', unit: 'nats', aggregation: 'token-weighted', description: 'Policy entropy: PPO\u2019s optional entropy term' },
  { key: 'train/jsd_loss', title: 'JSD to reference', unit: '', aggregation: 'token-weighted', description: 'Optional Jensen–Shannon term toward the reference' },
  { key: 'train/value_loss', title: 'Value loss', unit: '', aggregation: 'token-weighted', description: 'The critic\u2019s value loss before its coefficient' },
  { key: 'train/critic_loss', title: 'Critic loss', unit: '', aggregation: 'token-weighted', description: 'The value loss scaled by its coefficient' },
  { key: 'train/value_clip_fraction', title: 'Value clip fraction', unit: 'fraction', aggregation: 'token-weighted',
    description: 'Share of tokens where the critic\u2019s value clip was active' },
  { key: 'train/advantage_mean', title: 'Advantage mean', unit: '', aggregation: 'over valid action tokens (PPO); plain mean (NFT)',
    description: 'Average advantage (PPO: of the normalized policy advantages)' },
  { key: 'train/advantage_std', title: 'Advantage std', unit: '', aggregation: 'over valid action tokens', description: 'Spread of the normalized policy advantages' },
  { key: 'train/value_advantage_mean', title: 'Value advantage mean', unit: '', aggregation: 'over valid action tokens',
    description: 'Average GAE advantage behind the value targets' },
  { key: 'train/return_mean', title: 'Return mean', unit: '', aggregation: 'over valid action tokens', description: 'Average value target (return)' },
  { key: 'train/value_mean', title: 'Value mean', unit: '', aggregation: 'over valid action tokens', description: 'Average of the old value estimates' },
  { key: 'train/reference_kl_mean', title: 'KL to reference (sampled)', unit: 'nats', aggregation: 'batch mean', description: 'Sampled KL to the reference, averaged over the batch' },
  { key: 'train/valid_action_tokens', title: 'Valid action tokens', unit: 'tokens', aggregation: 'count', description: 'Action tokens that entered the update' },
  { key: 'train/behavior_logprob_delta_{stat}', title: 'Policy − rollout logprob ({stat})', unit: 'nats', aggregation: PPO_DP,
    description: 'Before the update: how the policy\u2019s logprobs differ from the rollout\u2019s ({stat})' },
  { key: 'train/initial_ratio_{stat}', title: 'Initial importance ratio ({stat})', unit: 'ratio', aggregation: PPO_DP,
    description: 'Before the update: policy-over-rollout probability ratio ({stat})' },
  { key: 'train/initial_clip_fraction', title: 'Initial clip fraction', unit: 'fraction', aggregation: PPO_DP,
    description: 'Before the update: share of tokens already outside the clip range' },
  { key: 'train/initial_importance_ess', title: 'Initial importance ESS', unit: '', aggregation: PPO_DP,
    description: 'Before the update: effective sample size of the importance weights' },
  { key: 'train/reference_behavior_logprob_delta_{stat}', title: 'Reference − rollout logprob ({stat})', unit: 'nats', aggregation: PPO_DP,
    description: 'How the reference\u2019s logprobs differ from the rollout\u2019s ({stat})' },
  { key: 'train/policy_reference_logprob_delta_{stat}', title: 'Policy − reference logprob ({stat})', unit: 'nats', aggregation: PPO_DP,
    description: 'How the policy\u2019s logprobs differ from the reference\u2019s ({stat})' },
  { key: 'train/policy_lr', title: 'Policy learning rate', unit: '', aggregation: 'final value of the policy window',
    description: 'Learning rate left for the policy\u2019s next update' },
  { key: 'train/critic_lr', title: 'Critic learning rate', unit: '', aggregation: 'final value of the critic window',
    description: 'Learning rate left for the critic\u2019s next update' },
  { key: 'train/actor_warmup', title: 'Actor warm-up', unit: '', aggregation: 'exact per-iteration flag',
    description: '1 on a critic-only warm-up iteration (the policy does not update, its keys are absent), else 0' },
  { key: 'optim/policy_optimizer_step', title: 'Policy optimizer steps', unit: 'steps', aggregation: 'final exact counter of the role',
    description: 'Durable count of policy minibatch updates; advances by the same number as the critic\u2019s per iteration' },
  { key: 'optim/critic_optimizer_step', title: 'Critic optimizer steps', unit: 'steps', aggregation: 'final exact counter of the role',
    description: 'Durable count of critic minibatch updates; advances by the same number as the policy\u2019s per iteration' },

  // posttrain: DPO (train/ and val/)
  { key: 'train/dpo_reward_margin', title: 'DPO reward margin', unit: '', aggregation: MEAN, description: 'Gap between the implicit rewards of winner and loser' },
  { key: 'train/dpo_reward_winner', title: 'DPO winner reward', unit: '', aggregation: MEAN, description: 'Implicit reward of the preferred answer' },
  { key: 'train/dpo_reward_loser', title: 'DPO loser reward', unit: '', aggregation: MEAN, description: 'Implicit reward of the rejected answer' },
  { key: 'train/dpo_accuracy', title: 'DPO accuracy', unit: 'fraction', aggregation: MEAN,
    hints: [{ rule: 'trend', direction: 'flat', window: 10,
      message: 'Not rising (mean {first} → {last} over the first and last 10 steps): it starts near 0.5 and should climb' }],
    description: 'Share of pairs the policy ranks the right way round; starts near 0.5 and should rise' },
  { key: 'train/dpo_err_{side}', vars: { side: SIDES }, title: 'DPO denoising error ({side})', unit: '', aggregation: MEAN,
    description: 'Denoising error of the {side} answer' },
  { key: 'train/dpo_raw_model_loss', title: 'DPO raw policy loss', unit: '', aggregation: MEAN, description: 'Policy loss before the preference combination' },
  { key: 'train/dpo_raw_ref_loss', title: 'DPO raw reference loss', unit: '', aggregation: MEAN, description: 'Reference loss before the preference combination' },

  // posttrain: OPD
  { key: 'train/opd_divergence', title: 'OPD divergence', unit: '', aggregation: 'token-weighted', description: 'How far the policy is from the teacher' },
  { key: 'train/opd_advantage', title: 'OPD advantage', unit: '', aggregation: 'token-weighted', description: 'The advantage term (advantage form only)' },
  { key: 'train/opd_teacher_credit', title: 'OPD teacher credit', unit: '', aggregation: 'token-weighted', description: 'Credit the teacher assigns (advantage form only)' },

  // posttrain: NFT (policy_loss, advantage_mean and reward_mean above)
  { key: 'train/kl_loss', title: 'KL loss', unit: '', aggregation: MEAN, description: 'The KL component of the NFT loss' },
  { key: 'train/optimality_mean', title: 'Optimality ratio mean', unit: '', aggregation: MEAN, description: 'First moment of the optimality ratio' },
  { key: 'train/optimality_second_moment', title: 'Optimality ratio 2nd moment', unit: '', aggregation: MEAN, description: 'Second moment of the optimality ratio' },
  { key: 'train/optimality_std', title: 'Optimality weights std', unit: '', aggregation: MEAN, description: 'Spread of the optimality weights' },
  { key: 'train/positive_error', title: 'Positive-branch error', unit: '', aggregation: MEAN, description: 'Error on the positive branch' },
  { key: 'train/negative_error', title: 'Negative-branch error', unit: '', aggregation: MEAN, description: 'Error on the negative branch' },

  // posttrain: flow-BC (train/ and val/; loss_avg above)
  { key: 'train/flow_bc_masked_elements', title: 'Supervised action elements', unit: 'elements', aggregation: 'sum',
    description: 'Action elements this rank supervised (the sum of action_mask)' },

  // posttrain: optimizer outcome
  { key: 'optim/update_outcome', title: 'Update outcome', unit: '', aggregation: ATTEMPT,
    hints: [{ rule: 'equals', value: 'skipped',
      message: '{count} update(s) rejected, last at step {step} (non-finite loss or gradient: see optim/skip_reason); fatal at the GRPO entry' }],
    description: 'What became of the update attempt: accumulating, applied, skipped (rejected) or discarded' },
  { key: 'optim/skip_reason', title: 'Skip reason', unit: '', aggregation: ATTEMPT, description: 'Why an update was rejected: non-finite loss or non-finite gradient' },
  { key: 'optim/step_skipped', title: 'Step skipped', unit: '', aggregation: ATTEMPT, description: 'Whether this update attempt was skipped' },
  { key: 'optim/attempt_id', title: 'Update attempt', unit: '', aggregation: ATTEMPT, description: 'Ever-increasing id of the update attempt' },
  { key: 'optim/optimizer_step', title: 'Optimizer steps', unit: 'steps', aggregation: 'cumulative counter', description: 'How many optimizer updates have been committed up to now' },
  { key: 'optim/nonfinite_skips_total', title: 'Non-finite skips', unit: 'updates', aggregation: 'cumulative counter',
    hints: [{ rule: 'increases', message: 'Rising: {count} update(s) rejected for a non-finite loss or gradient, first at step {step}' }],
    description: 'Updates rejected for a non-finite loss or gradient, so far' },
  { key: 'optim/nonfinite_skips_consecutive', title: 'Non-finite skips in a row', unit: 'updates', aggregation: 'counter (resets on success)',
    hints: [{ rule: 'last-above', threshold: 0, message: '{value} update(s) in a row rejected for non-finite values at step {step}: the run is stalled' }],
    description: 'Updates rejected for non-finite values one after the other, up to now' },
  { key: 'optim/zero_grad_skips_total', title: 'Zero-gradient skips', unit: 'updates', aggregation: 'cumulative counter',
    description: 'Updates skipped because the gradient was exactly zero; rising is expected in GRPO (tied groups): read it with the informative groups' },
  { key: 'optim/finite_gradient_check_enabled', title: 'Finite-gradient check', unit: '', aggregation: 'per step', description: 'On when the trainer checks gradients are finite (force_finite_grads)' },

  // posttrain: validation phase
  { key: 'val/loss_avg', title: 'Loss (validation)', unit: '', aggregation: MEAN, description: 'Objective loss on held-out data (DPO)' },
  { key: 'val/reward_avg', title: 'Reward mean (validation)', unit: '', aggregation: 'over held-out rollouts',
    description: 'Average reward of held-out rollouts (GRPO family, OPD)' },
  { key: 'val/reward_std', title: 'Reward std (validation)', unit: '', aggregation: 'over held-out rollouts',
    description: 'Spread of the held-out rollouts\u2019 rewards (GRPO family, OPD)' },
];

// ------------------------------------------------------------------ lookup (the only logic)

const EXACT = new Map();
const PATTERNS = [];
for (const r of RECORDS) {
  if (!r.key.includes('{')) EXACT.set(r.key, r);
  else PATTERNS.push({ record: r, re: new RegExp(`^${r.key.replace(/[.*+?^$()|[\]\\/]/g, '\\$&').replace(/\{(\w+)\}/g, '(?<$1>[A-Za-z0-9_]+?)')}$`) });
}

function match(key) {
  if (EXACT.has(key)) return { record: EXACT.get(key), vars: {} };
  for (const p of PATTERNS) {
    const m = p.re.exec(key);
    if (!m) continue;
    const vars = {};
    const ok = Object.entries(m.groups).every(([name, raw]) => {
      const table = p.record.vars?.[name];
      if (table && !Object.hasOwn(table, raw)) return false;
      vars[name] = table ? table[raw] : raw;
      return true;
    });
    if (ok) return { record: p.record, vars };
  }
  return null;
}

/** The keys a key may be registered as, with the title suffix each implies. */
function candidates(key) {
  const m = /^(train|val)\/(.+)$/.exec(key);
  if (!m) return [[key, ''], [`train/${key}`, '']];
  if (m[1] === 'train') return [[key, ''], [m[2], '']];
  return [[key, ''], [`train/${m[2]}`, ' (validation)'], [m[2], ' (validation)']];
}

function find(key) {
  if (typeof key !== 'string') return null;
  for (const [cand, suffix] of candidates(key)) {
    const found = match(cand);
    if (found) return { ...found, suffix };
  }
  return null;
}

function fill(text, vars) {
  return text.replace(/\{(\w+)(:lower)?\}/g, (all, name, lower) => {
    if (!(name in vars)) return all;
    return lower ? vars[name].toLowerCase() : vars[name];
  });
}

/**
 * What the registry knows of a step key: {title, description, unit, aggregation} or null.
 * A `val/` key says so in its title.
 */
export function describe(key) {
  const found = find(key);
  if (!found) return null;
  const { record: r, vars, suffix } = found;
  return { title: fill(r.title, vars) + suffix, description: fill(r.description, vars), unit: r.unit,
    aggregation: r.aggregation };
}

/**
 * The health hints of a step key, each a copy with `key` (the key itself) and its `refs`
 * resolved to whole keys under the key's own phase prefix ('' for a bare key).
 */
export function hintsFor(key) {
  const found = find(key);
  if (!found?.record.hints) return [];
  const prefix = /^(train|val)\//.exec(key)?.[0] ?? '';
  return found.record.hints.map((h) => ({ ...h, key,
    refs: Object.fromEntries(Object.entries(h.refs ?? {}).map(([n, k]) => [n, k.includes('/') ? k : prefix + k])) }));
}

/** The "?" tooltip of a described key: description, then unit and aggregation, then the key. */
export function tooltip(key, info) {
  const facts = [info.unit && `unit: ${info.unit}`, info.aggregation && `aggregation: ${info.aggregation}`].filter(Boolean);
  return [info.description, facts.join(' · '), `key: ${key}`].filter(Boolean).join('\n');
}

// ------------------------------------------------------------------ the server's derived series

/** Units that count things: their series tick in integers unless an aggregation averages them. */
const COUNT_UNITS = new Set(['blocks', 'calls', 'cells', 'completions', 'elements', 'groups', 'microbatches',
  'prompts', 'rank', 'rounds', 'samples', 'sequences', 'steps', 'tokens', 'trajectories', 'updates']);
const AVERAGED = /mean|weighted|average|token-/i;

/** Whether a record's values are whole numbers: a count not averaged (its own `integer` wins). */
function countsOf(r) {
  return r.integer ?? (COUNT_UNITS.has(r.unit) && !AVERAGED.test(`${r.aggregation ?? ''} ${r.title ?? ''}`));
}

const KEPT = 'the step\u2019s kept samples';
const PER_GROUP = 'mean over prompt groups';
const VALUE_HELP = 'the mean line, its \u00b1 std band and min/max envelope';

/**
 * The server's derived families (docs/statistics.md "Families") in words: per kind, the
 * metrics it names (`*`: a user-named sample metric, titled by its own key) and their
 * statistics. A chart of the value family (mean, std, min, max) is titled by the metric; any
 * other statistic's chart `<metric> · <statistic in words>` unless the statistic has a title
 * of its own. `{metric}` in a text is the metric's title.
 */
const METRIC_STATS = {
  count: { words: 'samples', unit: 'samples', aggregation: 'count of finite values',
    description: 'Kept samples with a finite {metric} at the step' },
  gini_mean: { words: 'inequality within groups (Gini)', unit: '', aggregation: PER_GROUP,
    description: 'Gini of {metric} inside each prompt group (0: all equal, at most (n\u22121)/n), averaged over groups' },
  gini_excluded: { words: 'groups left out of the Gini', unit: 'groups', aggregation: 'count',
    description: 'Prompt groups left out of the Gini mean of {metric}: groups of one sample, or with a value below the declared minimum' },
  null_count: { words: 'missing values', unit: 'samples', aggregation: 'count',
    description: 'Kept samples whose {metric} is null or not finite, left out of every statistic' },
};
const TOKENS = (what, whose) => ({ title: `${what} tokens${whose}`, unit: 'tokens', aggregation: 'mean, std, min, max over samples',
  description: `${what} tokens per sample${what === 'Completion' ? ' (summed over turns)' : ''} of ${whose ? 'the step\u2019s discarded samples' : KEPT}: ${VALUE_HELP}` });
const AT_BOUNDS = { words: 'share at the declared min / max', unit: '%', aggregation: '100 \u00d7 at the bound / samples declaring it',
  description: 'Share of kept samples whose {metric} equals its environment\u2019s declared minimum, and maximum' };
const DERIVED = {
  reward: { reward: { title: 'Reward', unit: '', aggregation: 'mean, std, min, max over samples', stats: METRIC_STATS,
    description: `Reward of ${KEPT}, all environments together and each one: ${VALUE_HELP}` } },
  sample: { '*': { unit: '', aggregation: 'mean, std, min, max over samples', stats: METRIC_STATS,
    description: `Sample metric {metric} of ${KEPT}, all environments together and each one: ${VALUE_HELP}` } },
  advantage: { advantage: { title: 'Advantage', unit: '', aggregation: 'mean, std, min, max over samples',
    description: `Advantage of ${KEPT} (the line at 0 for reference): ${VALUE_HELP}` } },
  groups: { groups: { title: 'Prompt groups', self: 'count', unit: 'groups', aggregation: 'count of (step, group id)',
    description: 'Prompt groups of the step: informative (rewards not all equal) and tied stacked up to all groups; '
      + 'the lines all at min / all at max are tied groups at the declared reward bounds', stats: {
      informative: { words: 'informative', unit: 'groups', aggregation: 'count', description: 'Prompt groups whose rewards are not all equal' },
      tied: { words: 'tied', unit: 'groups', aggregation: 'count', description: 'Prompt groups whose rewards are all equal' },
      all_min: { words: 'all at min', unit: 'groups', aggregation: 'count', description: 'Tied groups whose every reward is the declared minimum' },
      all_max: { words: 'all at max', unit: 'groups', aggregation: 'count', description: 'Tied groups whose every reward is the declared maximum' },
    } } },
  rollouts: {
    prompt_tokens: TOKENS('Prompt', ''), completion_tokens: TOKENS('Completion', ''), total_tokens: TOKENS('Total', ''),
    off_policy_steps: { title: 'Off-policy lag', unit: 'steps', aggregation: 'mean over kept samples',
      description: 'How many policy versions behind the trainer the samples were generated, mean and std' },
  },
  discarded: {
    discarded: { title: 'Discarded samples', self: 'count', unit: 'samples', aggregation: 'count',
      description: 'Samples discarded for max_async or zero_advantage at the step', stats: {
        canceled: { title: 'Canceled samples', unit: 'samples', aggregation: 'count',
          description: 'Samples canceled in flight (a weight sync), counted apart from the discarded ones' },
        max_async_pct: { title: 'Discarded as too stale', unit: '%', aggregation: '100 \u00d7 max_async / discarded',
          description: 'Share of the discarded samples dropped for being more policy versions behind than max_async allows' },
        zero_advantage_pct: { title: 'Discarded for zero advantage', unit: '%', aggregation: '100 \u00d7 zero_advantage / discarded',
          description: 'Share of the discarded samples dropped because their group had no advantage to learn from' },
      } },
    zero_advantage: { title: 'Zero-advantage discards', unit: '%', aggregation: 'over zero-advantage discards', stats: {
      reward_zero_pct: { words: 'reward 0', unit: '%', aggregation: '100 \u00d7 reward 0 / zero-advantage discards',
        description: 'Share of the zero-advantage discards whose reward was 0 (groups that all failed)' },
      reward_positive_pct: { words: 'reward above 0', unit: '%', aggregation: '100 \u00d7 reward > 0 / zero-advantage discards',
        description: 'Share of the zero-advantage discards whose reward was above 0 (groups that all scored alike)' },
      reward_mean: { words: 'mean reward', unit: '', aggregation: 'mean over zero-advantage discards',
        description: 'Mean reward of the zero-advantage discards' },
    } },
    prompt_tokens: TOKENS('Prompt', ' (discarded)'), completion_tokens: TOKENS('Completion', ' (discarded)'),
    total_tokens: TOKENS('Total', ' (discarded)'),
  },
  ranges: { '*': { stats: {
    at_min_pct: AT_BOUNDS, at_max_pct: AT_BOUNDS, // one chart: at_min_pct names it
    outside_count: { words: 'outside the declared range', unit: 'samples', aggregation: 'count',
      description: 'Kept samples whose {metric} lies below the declared minimum or above the declared maximum' },
  } } },
};
const VALUE_STATS = new Set(['mean', 'std', 'min', 'max']);

/** A statistic id the registry has no words for, in words anyway: `foo_pct` → "foo (%)". */
const plainWords = (stat) => stat.replace(/_pct$/, ' (%)').replace(/_/g, ' ');

/** The metric a derived entry names: its words (a sample metric's own key) and its statistics. */
function derivedMetric(kind, key) {
  const metricKind = kind === 'ranges' ? (key === 'reward' ? 'reward' : 'sample') : kind;
  const table = DERIVED[metricKind];
  const m = table?.[key] ?? table?.['*'] ?? { unit: '', description: '' };
  const title = m.title ?? key.replace(/_/g, metricKind === 'sample' ? '_' : ' ');
  return { ...m, title, name: metricKind === 'reward' ? 'reward' : title,
    stats: kind === 'ranges' ? DERIVED.ranges['*'].stats : m.stats };
}

/**
 * What the registry knows of a catalog entry {kind, key, stat} as the title of its chart:
 * {title, description, unit, aggregation, integer}. A trainer's step key and a derived timing
 * series through describe() (null when unknown); a derived family's from its table above; a
 * derived key of its own (`stop_reason_length_pct`) by its record; anything else in plain words.
 */
export function describeSeries(entry) {
  const { kind, key } = entry;
  const stat = entry.stat ?? null;
  if (kind === 'step' || kind === 'timeline' || (stat === key && find(key))) {
    const info = describe(key);
    return info && { ...info, integer: countsOf(find(key).record) };
  }
  const metric = derivedMetric(kind, key);
  const self = stat === null || stat === key || stat === metric.self || VALUE_STATS.has(stat);
  const r = self ? metric : metric.stats?.[stat] ?? { words: plainWords(stat), unit: '', description: '' };
  const title = self || r.title ? r.title : `${metric.title} \u00b7 ${r.words}`;
  const description = (r.description || metric.description || '').replaceAll('{metric}', metric.name);
  return { title, description, unit: r.unit ?? metric.unit ?? '', aggregation: r.aggregation ?? metric.aggregation ?? '',
    integer: countsOf(r) };
}
