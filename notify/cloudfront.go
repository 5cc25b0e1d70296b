package notify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudfront"
	"github.com/aws/aws-sdk-go-v2/service/cloudfront/types"
	"github.com/aws/smithy-go"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
)

// CloudFrontOptions configure the CloudFront client.
type CloudFrontOptions struct {
	// Credentials replace the SDK's default chain (environment, shared
	// files, instance role).
	Credentials aws.CredentialsProvider
}

// cloudFront creates one invalidation per result, of the paths it changed.
type cloudFront struct {
	client   *cloudfront.Client
	dist     string
	prefix   string // URL path of the destination's root, "/…/"
	maxPaths int
}

// cloudFrontRegion is where CloudFront's API is signed: it is global.
const cloudFrontRegion = "us-east-1"

func newCloudFront(ctx context.Context, d config.Destination, c config.NotifyTarget, o CloudFrontOptions) (*cloudFront, error) {
	creds := o.Credentials
	if creds == nil {
		ac, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cloudFrontRegion))
		if err != nil {
			return nil, fmt.Errorf("load AWS configuration for CloudFront: %w", err)
		}
		creds = ac.Credentials
	}
	opts := cloudfront.Options{Region: cloudFrontRegion, Credentials: creds,
		// Throttling and the in-progress quota are retried by the
		// delivery's back-off, which outlasts the SDK's.
		Retryer: aws.NopRetryer{}}
	if c.Endpoint != "" {
		opts.BaseEndpoint = aws.String(c.Endpoint)
	}
	return &cloudFront{client: cloudfront.New(opts), dist: c.DistributionID, prefix: rootPath(d, c), maxPaths: c.MaxPaths}, nil
}

// rootPath is the URL path the destination's root is served under:
// path_prefix, else the path of links.base_url, else "/".
func rootPath(d config.Destination, c config.NotifyTarget) string {
	if c.PathPrefix != "" {
		return c.PathPrefix
	}
	if u, err := url.Parse(d.Links.BaseURL); err == nil && d.Links.BaseURL != "" {
		return "/" + strings.TrimPrefix(u.EscapedPath(), "/")
	}
	return "/"
}

func (c *cloudFront) send(ctx context.Context, r events.Result, _ []byte) error {
	paths := InvalidationPaths(c.prefix, r, c.maxPaths)
	if len(paths) == 0 {
		return nil
	}
	_, err := c.client.CreateInvalidation(ctx, &cloudfront.CreateInvalidationInput{
		DistributionId: aws.String(c.dist),
		InvalidationBatch: &types.InvalidationBatch{
			// The result id: a retried call finds the invalidation made.
			CallerReference: aws.String(r.ID),
			Paths:           &types.Paths{Quantity: aws.Int32(int32(len(paths))), Items: paths},
		},
	})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "InvalidationBatchAlreadyExists" {
		return nil // an earlier attempt created it
	}
	if err != nil {
		return fmt.Errorf("CloudFront CreateInvalidation on %s: %w", c.dist, err)
	}
	return nil
}

// InvalidationPaths are the URL paths (under prefix, "/…/") of the
// outputs r changed, at most max of them: the deepest folders holding
// several paths become prefix wildcards ("/docs/*") until they fit. An
// event whose output list was cut invalidates everything under prefix.
func InvalidationPaths(prefix string, r events.Result, max int) []string {
	if r.OutputsTruncated {
		return []string{prefix + "*"}
	}
	seen := map[string]bool{}
	var paths []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, o := range r.Outputs {
		p := prefix + (&url.URL{Path: o.Path}).EscapedPath()
		add(p)
		if dir, ok := strings.CutSuffix(p, "index.html"); ok && strings.HasSuffix(dir, "/") {
			add(dir) // the folder's URL serves the same page
		}
	}
	return ReducePaths(paths, max)
}

// ReducePaths folds paths into at most max entries: while there are too
// many, the deepest folder that holds two or more of them (the one
// holding most, then the first in order, on a tie) becomes "folder/*".
func ReducePaths(paths []string, max int) []string {
	set := append([]string(nil), paths...)
	for len(set) > max && len(set) > 1 {
		best, bestDepth, bestCount := "", -1, 0
		counts := map[string]int{}
		for _, p := range set {
			for i := range len(p) {
				if p[i] == '/' {
					counts[p[:i+1]]++
				}
			}
		}
		for dir, n := range counts {
			depth := strings.Count(dir, "/")
			if n < 2 {
				continue
			}
			if depth > bestDepth || depth == bestDepth && (n > bestCount || n == bestCount && dir < best) {
				best, bestDepth, bestCount = dir, depth, n
			}
		}
		if best == "" {
			break // paths that share no folder, not even "/"
		}
		kept := set[:0:0]
		for _, p := range set {
			if !strings.HasPrefix(p, best) {
				kept = append(kept, p)
			}
		}
		set = append(kept, best+"*")
	}
	return set
}
