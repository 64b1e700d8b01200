package supervisor

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Backlog reports how many tasks wait on a task queue.
type Backlog interface {
	Backlog(ctx context.Context, queue string) (int, error)
}

// QueueBacklog reads the backlog from Temporal's description of a task
// queue with its statistics (DescribeTaskQueue with report_stats, as
// server 1.29 answers it): the approximate backlog of workflow tasks plus that of
// activity tasks. Both count: with no process serving the queue, a task
// workflow's first workflow task waits there before its attempt is
// scheduled.
type QueueBacklog struct {
	Client    client.Client
	Namespace string
}

// Backlog implements Backlog.
func (q QueueBacklog) Backlog(ctx context.Context, queue string) (int, error) {
	total := int64(0)
	for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := q.Client.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace:     q.Namespace,
			TaskQueue:     &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: typ,
			ReportStats:   true,
		})
		if err != nil {
			return 0, fmt.Errorf("describe task queue %s (%s tasks): %w", queue, typ, err)
		}
		total += resp.GetStats().GetApproximateBacklogCount()
	}
	return int(total), nil
}
