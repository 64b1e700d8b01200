package datasets_test

import (
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/environments/datasets"
)

// Families with weights, and config keys for all of them or for one.
func ExampleParseGymFamilies() {
	fams, err := datasets.ParseGymFamilies("chain_sum,basic_arithmetic:3")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []string{"max_terms=3", "chain_sum.allow_negation=false"} {
		if err := datasets.SetGymConfig(fams, c); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, f := range fams {
		fmt.Println(f.Name, f.Weight, f.Config)
	}
	fmt.Println(datasets.SetGymConfig(fams, "seed=2"))
	// Output:
	// chain_sum 1 map[allow_negation:false max_terms:3]
	// basic_arithmetic 3 map[max_terms:3]
	// --config seed=2: "seed" is not a config key here; the seed is --seed and the number of rows --size
}

// Generating needs an interpreter with reasoning-gym: the project venv.
func ExampleGym() {
	fams, _ := datasets.ParseGymFamilies("chain_sum")
	set, err := datasets.Gym(context.Background(), &datasets.GymOptions{
		Python: ".venv-py/bin/python", Families: fams, Size: 100, HeldOut: 10, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(set.Train), len(set.HeldOut), set.HeldOut[0].Prompt)
	// With reasoning-gym 0.1.25, it prints:
	// 90 10 State the final answer to the following arithmetic problem: 4 - 1 - 7 =
}
