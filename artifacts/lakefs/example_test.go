package lakefs_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
)

// Open a repository on the lakeFS server that LAKECTL_SERVER_ENDPOINT_URL
// and the LAKECTL_CREDENTIALS_* variables name, through the registry.
func Example() {
	ctx := context.Background()
	st, err := artifacts.Open(ctx, "lakefs://my-repo", nil)
	if err != nil {
		log.Fatal(err) // errors.Is(err, artifacts.ErrRepositoryNotFound): run `rlpipe init-store`
	}
	defer st.Close()
	c, err := st.ResolveRef(ctx, "main")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("main is at", c.ID)
}

// Configure the client in code instead of the environment.
func ExampleOpen() {
	ctx := context.Background()
	c, err := lakefs.NewClient(lakefs.Config{
		Endpoint:        "http://localhost:8000",
		AccessKeyID:     "AKIA...",
		SecretAccessKey: "...",
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := lakefs.Open(ctx, c, "my-repo", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	for b, err := range st.ListBranches(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(b.Name, b.CommitID)
	}
}

// Create a repository whose data lives in an S3 bucket.
func ExampleCreate() {
	ctx := context.Background()
	c, err := lakefs.NewClient(lakefs.ConfigFromEnv())
	if err != nil {
		log.Fatal(err)
	}
	st, err := lakefs.Create(ctx, c, "rl-runs", &artifacts.Options{StorageNamespace: "s3://my-bucket/rl-runs"})
	if err != nil {
		log.Fatal(err) // errors.Is(err, artifacts.ErrRepositoryExists) if it is there already
	}
	defer st.Close()
}
