package agent_test

import (
	"context"
	"fmt"
	"os"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/policy"
)

// A scripted agent fixes a bug in a one-file world. Run executes its work
// once it has answered; the verifier compares what that printed with the
// answer, which only it sees.
func ExampleEnv() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "worlds-")
	defer os.RemoveAll(dir)
	cache, err := agent.NewCache(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	world, err := cache.World(ctx, agent.WorldSpec{Name: "sum",
		Files: map[string][]byte{"sum.sh": []byte("echo $(( $1 - $2 ))\n")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	env, err := agent.NewEnv(world, agent.Task{
		Instruction: "sum.sh should print the sum of its two arguments. Fix it.",
		Run:         "bash sum.sh 2 3; bash sum.sh -1 1",
		Checks:      map[string][]byte{"expected.txt": []byte("5\n0\n")},
		Verifier:    `cmp -s /candidate/stdout /check/expected.txt && echo pass > "$RLPIPE_VERDICT"`,
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	replies := []string{
		"```bash\nbash sum.sh 2 3\n```",
		"```bash\nsed -i 's/ - / + /' sum.sh && bash sum.sh 2 3\n```",
		"Fixed: it added with a minus sign.",
	}
	agentPolicy := environments.Scripted(func(msgs []policy.Message) string {
		return replies[len(msgs)/2]
	})
	runner, err := environments.NewRunner(agentPolicy, &environments.RunnerOptions{MaxTurns: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := runner.Run(ctx, env, environments.Episode{ID: "sum-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range res.Trajectory.Turns[1:] {
		fmt.Printf("%s: %s\n", t.Role, t.Content)
	}
	fmt.Println(res.Trajectory.Status, res.Reward, res.Info["run_status"], res.Info["verifier_verdict"])
	// Output:
	// assistant: ```bash
	// bash sum.sh 2 3
	// ```
	// user: exit status 0 (ok)
	// stdout:
	// -1
	// stderr:
	// (empty)
	// assistant: ```bash
	// sed -i 's/ - / + /' sum.sh && bash sum.sh 2 3
	// ```
	// user: exit status 0 (ok)
	// stdout:
	// 5
	// stderr:
	// (empty)
	// assistant: Fixed: it added with a minus sign.
	// user: verified: reward 1
	// ok 1 ok pass
}

// ParseToolCall finds the bash block of a reply.
func ExampleParseToolCall() {
	call, ok, err := agent.ParseToolCall("Let me list the files.\n```bash\nls -1\n```")
	fmt.Printf("%q %v %v\n", call.Command, ok, err)
	calls, err := call.JSON()
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println(calls)
	_, ok, _ = agent.ParseToolCall("The answer is 42.")
	fmt.Println(ok)
	// Output:
	// "ls -1" true <nil>
	// [{"tool":"bash","command":"ls -1"}]
	// false
}
