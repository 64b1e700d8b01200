// Package kinds assembles what a pipeline file can name in this program,
// in one registry value: the stage kinds in the order messages list them,
// the policy and tracker backends, the RL environments, the advantage
// estimators, the policy losses, the evaluation metrics, and the sources of the iteration's
// health and evaluation steps. The command
// line reads every pipeline file with Registry; a program of its own that
// runs pipelines can use it, or assemble a registry with its own kinds.
package kinds

import (
	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/environments/episodes"
	"github.com/rlpipe/rlpipe/environments/guess"
	"github.com/rlpipe/rlpipe/environments/harbor"
	"github.com/rlpipe/rlpipe/environments/openenv"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/reports"
	"github.com/rlpipe/rlpipe/rewards/runners"
	"github.com/rlpipe/rlpipe/rollouts"
	"github.com/rlpipe/rlpipe/trackers"
	grpo "github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external"
	trainloss "github.com/rlpipe/rlpipe/trainers/grpo"
)

// Registry is the stage kinds, plug-ins and step sources rlpipe ships.
func Registry() *kind.Registry {
	// The RL environments an episodes stage can name (its rl_env key):
	// guess, the number-guessing game with higher/lower feedback
	// (environments/guess), one secret per episode id; agent, a coding
	// agent's episodes in a copy-on-write sandboxed world
	// (environments/agent), the task of each episode read from its prompt
	// row, the world from rl_options; and chain, a running sum over
	// several turns in the embedded model's vocabulary
	// (environments/arith), from each prompt's problem; skyrl_gym,
	// SkyRL-gym's environments in a supervised Python worker
	// (environments/skyrlgym), the extras of each episode from its row;
	// harbor, Harbor tasks in sandboxed worlds with a separate verifier
	// sandbox (environments/harbor), the task of each episode named by its
	// prompt row, the tasks directory from rl_options; openenv, episodes on an
	// OpenEnv server's /ws, at a URL or served by rlpipe (environments/openenv).
	envs := environments.RLEnvs{guess.RLEnv, agent.RLEnv, arith.ChainEnv, skyrlgym.RLEnv, harbor.RLEnv, openenv.RLEnv}
	return &kind.Registry{
		Kinds: []kind.Kind{
			standin.Kind,
			kind.Command,
			rollouts.DatasetKind,
			runners.CELKind,
			rollouts.RolloutKind,
			episodes.NewKind(envs),
			grpo.GRPOKind,
			external.Kind,
		},
		// The policy backends: the embedded model, and servers of the
		// OpenAI API.
		Policies:     policy.Backends{embedded.Backend, openai.Backend},
		Trackers:     trackers.Backends{trackers.TensorBoardBackend, trackers.MLflowBackend, trackers.WandbBackend},
		Environments: envs,
		// The advantage estimators the advantages section names.
		Estimators: advantages.Estimators{advantages.GRPO, advantages.RLOO, advantages.DrGRPO, advantages.ReinforcePPBaseline, advantages.GAEEstimator},
		// The policy losses the trainer section's loss key names.
		Losses: kind.Losses{trainloss.PPOClip, trainloss.GSPO, trainloss.CISPO, trainloss.Reinforce},
		// The evaluation metrics, each computed at every k of eval.k.
		Metrics: kind.Metrics{evaluators.AvgAtK, evaluators.MajAtKMetric, evaluators.PassAtKMetric, evaluators.PassHatKMetric},
		// Where a run's task calls run under a driver in this process
		// (rlpipe run --executor NAME): this process. Temporal is the
		// command's own mode, not an entry (cli/cmd_run.go, temporalMode).
		Executors: pipeline.ExecutorKinds{pipeline.Local},
		// The steps every iteration may have beyond the stages' own.
		Steps: []kind.StepSource{reports.HealthSteps, evaluators.Steps},
	}
}

// TaskOrder is the order in which the task calls of this program's runs
// are listed (pipeline.TaskOrder of the steps its kinds and registry can
// add): the slots with the advantages step between reward and train,
// then the health step, then the evaluations of the starting policy and
// of a checkpoint. The steps are the shipped ones' shapes; their tasks
// are not built.
func TaskOrder() []string {
	steps := []pipeline.Step{advantages.Step(advantages.TrainOptions{}), reports.HealthStep()}
	return pipeline.TaskOrder(append(steps, pipeline.EvalSteps(pipeline.EvalConfig{}, nil, nil)...))
}
