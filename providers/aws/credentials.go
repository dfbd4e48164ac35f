package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"

	"github.com/fleetcast/autoscaler/providers"
)

// howToCredential says how to give the controller AWS credentials.
const howToCredential = "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run on an instance with a role"

// checkCredentials retrieves cfg's credentials once when the SDK's
// default chain found none in the environment or the shared files and
// fell through to the instance's role: without one, that is a
// *providers.NoCredentialsError, one line that says how to set them
// (the chain's own account of each place it looked is logged at debug
// level). Credentials found elsewhere are left to the first call, whose
// error then says what is wrong with them.
func (p *Provider) checkCredentials(ctx context.Context, cfg aws.Config) error {
	cache, ok := cfg.Credentials.(*aws.CredentialsCache)
	if !ok || !cache.IsCredentialsProvider((*ec2rolecreds.Provider)(nil)) {
		return nil
	}
	if _, err := cache.Retrieve(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		p.log.Debug("no AWS credentials in the environment, the shared files or the instance's role", "error", err)
		return &providers.NoCredentialsError{Cloud: "AWS", How: howToCredential, Err: err}
	}
	return nil
}
