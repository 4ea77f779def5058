# An agent on AWS Lambda whose team memory lives in S3: the bucket module, a role holding exactly
# the module's access policy, and the function as a container image (deploy/lambda/Dockerfile),
# invoked through a function URL that requires IAM-signed requests.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.30"
    }
  }
}

provider "aws" {
  region = var.region
}

variable "region" {
  description = "The region of the function, the bucket and the image's ECR repository (its URI names it: 123456789012.dkr.ecr.REGION.amazonaws.com/...)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "region must be an AWS region such as eu-west-1."
  }
}

variable "name" {
  description = "Prefix of every name this deployment creates (role, function, log group), so deployments in one account do not collide."
  type        = string
  default     = "bucket-memory-agent"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,40}$", var.name))
    error_message = "name must be 1 to 40 letters, digits, _ or -."
  }
}

variable "bucket_name" {
  description = "A globally unique bucket name."
  type        = string
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete the bucket with every memory in it (apply with true first, then destroy)."
  type        = bool
  default     = false
}

variable "memory_prefix" {
  description = "The memory this function shares."
  type        = string
  default     = "teams/blue"
}

variable "image_uri" {
  description = "The function's image in ECR, built from deploy/lambda/Dockerfile, such as 123456789012.dkr.ecr.eu-west-1.amazonaws.com/agent:1."
  type        = string
}

variable "reserved_concurrency" {
  description = "Instances the function may run at once, a cap on cost and on writers racing for the memory's log; null (the default) reserves none, since a new account's whole quota may be 10 and reserving needs 10 left unreserved."
  type        = number
  default     = null

  validation {
    condition     = var.reserved_concurrency == null || try(var.reserved_concurrency >= 1, false)
    error_message = "reserved_concurrency must be null or at least 1 (0 would stop the function)."
  }
}

variable "timeout" {
  description = "Seconds one invocation may run. Each memory operation gets a third of it (MEMORY_OPERATION_TIMEOUT), so a slow store fails an operation, not the whole invocation."
  type        = number
  default     = 60

  validation {
    condition     = var.timeout >= 10 && var.timeout <= 900
    error_message = "timeout must be 10 to 900 seconds (Lambda's limit)."
  }
}

variable "architecture" {
  description = "The function's instruction set: x86_64, or arm64 for Graviton (build the image with --platform linux/arm64 then)."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture must be x86_64 or arm64."
  }
}

variable "memory_size" {
  description = "MB of memory for one instance (Lambda gives CPU in proportion: 1,769 MB is one vCPU)."
  type        = number
  default     = 1024

  validation {
    condition     = var.memory_size >= 128 && var.memory_size <= 10240
    error_message = "memory_size must be 128 to 10240 MB (Lambda's limits)."
  }
}

variable "log_retention_days" {
  description = "Days CloudWatch keeps the function's logs."
  type        = number
  default     = 30
}

variable "model" {
  description = "The model the agent uses, such as openai:gpt-5-mini; empty runs the scripted offline model."
  type        = string
  default     = ""
}

variable "model_api_key_parameter" {
  description = "Name of the SSM SecureString parameter holding the model's API key, created outside Terraform so the key never enters its state; empty for none."
  type        = string
  default     = ""
}

variable "model_api_key_env" {
  description = "The environment variable the model's SDK reads its key from."
  type        = string
  default     = "OPENAI_API_KEY"
}

module "memory" {
  source        = "../../modules/s3-memory-bucket"
  bucket_name   = var.bucket_name
  prefixes      = [var.memory_prefix]
  force_destroy = var.force_destroy
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "agent" {
  name               = var.name
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_iam_role_policy" "memory" {
  name   = "bucket-memory"
  role   = aws_iam_role.agent.id
  policy = module.memory.access_policy_json
}

data "aws_ssm_parameter" "model_api_key" {
  count           = var.model_api_key_parameter == "" ? 0 : 1
  name            = var.model_api_key_parameter
  with_decryption = false
}

data "aws_iam_policy_document" "model_api_key" {
  count = var.model_api_key_parameter == "" ? 0 : 1
  statement {
    actions   = ["ssm:GetParameter"]
    resources = [data.aws_ssm_parameter.model_api_key[0].arn]
  }
}

resource "aws_iam_role_policy" "model_api_key" {
  count  = var.model_api_key_parameter == "" ? 0 : 1
  name   = "model-api-key"
  role   = aws_iam_role.agent.id
  policy = data.aws_iam_policy_document.model_api_key[0].json
}

resource "aws_cloudwatch_log_group" "agent" {
  #checkov:skip=CKV_AWS_158:The function logs no memory text (bucket-memory's warnings name paths and URLs); add a KMS key in your account baseline if required.
  #checkov:skip=CKV_AWS_338:Retention is the log_retention_days input (30 days by default); a year is a compliance choice.
  name              = "/aws/lambda/${var.name}"
  retention_in_days = var.log_retention_days
}

data "aws_iam_policy_document" "logs" {
  statement {
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.agent.arn}:*"]
  }
}

resource "aws_iam_role_policy" "logs" {
  name   = "logs"
  role   = aws_iam_role.agent.id
  policy = data.aws_iam_policy_document.logs.json
}

resource "aws_lambda_function" "agent" {
  #checkov:skip=CKV_AWS_116:Callers invoke it synchronously (the function URL, or aws lambda invoke), so failures return to them; add a DLQ if you invoke it asynchronously.
  #checkov:skip=CKV_AWS_117:The function reaches S3 over the public endpoint; put it in a VPC with an S3 gateway endpoint if required.
  #checkov:skip=CKV_AWS_173:The environment holds no secret: the model's key is read from SSM at cold start.
  #checkov:skip=CKV_AWS_272:Code signing does not apply to container images.
  #checkov:skip=CKV_AWS_50:X-Ray tracing is optional.
  function_name                  = var.name
  role                           = aws_iam_role.agent.arn
  package_type                   = "Image"
  image_uri                      = var.image_uri
  timeout                        = var.timeout
  memory_size                    = var.memory_size
  architectures                  = [var.architecture]
  reserved_concurrent_executions = var.reserved_concurrency == null ? -1 : var.reserved_concurrency

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.agent.name
  }

  environment {
    variables = {
      MEMORY_URL               = module.memory.memory_urls[0]
      MEMORY_OPERATION_TIMEOUT = tostring(floor(var.timeout / 3))
      MODEL                    = var.model
      MODEL_API_KEY_PARAMETER  = var.model_api_key_parameter
      MODEL_API_KEY_ENV        = var.model_api_key_env
    }
  }

  lifecycle {
    precondition {
      condition     = can(regex("\\.dkr\\.ecr\\.${var.region}\\.amazonaws\\.com/", var.image_uri))
      error_message = "image_uri must be in an ECR repository of var.region (${var.region}): Lambda pulls images only from its own region."
    }
  }

  depends_on = [aws_iam_role_policy.logs]
}

resource "aws_lambda_function_url" "agent" {
  function_name      = aws_lambda_function.agent.function_name
  authorization_type = "AWS_IAM"
}

output "memory_url" {
  description = "The memory the function shares."
  value       = module.memory.memory_urls[0]
}

output "function_name" {
  description = "The function, for `aws lambda invoke --function-name`."
  value       = aws_lambda_function.agent.function_name
}

output "function_url" {
  description = "The function URL; requests must be signed with SigV4 by a principal allowed lambda:InvokeFunctionUrl."
  value       = aws_lambda_function_url.agent.function_url
}

output "operator_policy_json" {
  description = "Attach to the operators who run recover, compact and verify on this memory."
  value       = module.memory.operator_policy_json
}
