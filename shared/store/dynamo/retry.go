package dynamo

import (
	"context"
	"errors"
	"io"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// RetryCutResponses is a client option: a call whose response was cut off in transit
// (the body ended before its length, io.ErrUnexpectedEOF while decoding it) is retried,
// within the client's retryer and its attempts, when repeating it cannot change the
// outcome. The SDK retries a reset connection but not a cut body, whatever the call.
//
// Repeats are safe for reads and for TransactWriteItems: the SDK gives each transaction
// a ClientRequestToken, kept across attempts, and DynamoDB answers a repeat within ten
// minutes as the first without applying it again. A conditional single-item write is not
// retried: if the cut response was to a write that was applied, its repeat would fail
// its condition and be taken for a conflict; the cut is reported instead.
func RetryCutResponses(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Deserialize.Add(cutResponse{}, middleware.Before)
	})
}

// repeatable are the operations the store calls whose repeat cannot change the outcome.
var repeatable = map[string]bool{
	"GetItem": true, "BatchGetItem": true, "Query": true, "Scan": true, "DescribeTable": true,
	"DescribeTimeToLive": true, "TransactGetItems": true, "TransactWriteItems": true,
}

// cutResponse marks a cut response to a repeatable call retryable.
type cutResponse struct{}

func (cutResponse) ID() string { return "mirrorfleet/RetryCutResponses" }

func (cutResponse) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if err != nil && errors.Is(err, io.ErrUnexpectedEOF) && repeatable[awsmiddleware.GetOperationName(ctx)] {
		err = retryableCut{err}
	}
	return out, md, err
}

// retryableCut is a cut response the SDK's retryer may retry (it asks RetryableError).
type retryableCut struct{ error }

func (retryableCut) RetryableError() bool { return true }
func (e retryableCut) Unwrap() error      { return e.error }
