# An agent on AWS Lambda whose team memory lives in S3: the bucket module, a role with exactly the
# module's access policy, and the function running examples/lambda_handler.py.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.30"
    }
  }
}

variable "bucket_name" {
  description = "A globally unique bucket name."
  type        = string
}

variable "package_zip" {
  description = "The function package: this project, its dependencies and examples/, zipped for python3.13."
  type        = string
}

variable "memory_prefix" {
  description = "The memory this function shares."
  type        = string
  default     = "teams/blue"
}

module "memory" {
  source      = "../../modules/s3-memory-bucket"
  bucket_name = var.bucket_name
  prefixes    = [var.memory_prefix]
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
  name               = "bucket-memory-agent"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_iam_role_policy" "memory" {
  name   = "bucket-memory"
  role   = aws_iam_role.agent.id
  policy = module.memory.access_policy_json
}

resource "aws_iam_role_policy_attachment" "logs" {
  role       = aws_iam_role.agent.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
}

resource "aws_lambda_function" "agent" {
  #checkov:skip=CKV_AWS_116:A dead-letter queue depends on how the caller invokes the agent.
  #checkov:skip=CKV_AWS_117:The function reaches S3 over the public endpoint; put it in a VPC with an S3 gateway endpoint if required.
  #checkov:skip=CKV_AWS_173:The environment holds no secret, only the memory URL.
  #checkov:skip=CKV_AWS_272:Code signing is an organization policy decision.
  #checkov:skip=CKV_AWS_50:X-Ray tracing is optional.
  #checkov:skip=CKV_AWS_115:Concurrency limits belong to the caller's account plan.
  function_name    = "bucket-memory-agent"
  role             = aws_iam_role.agent.arn
  runtime          = "python3.13"
  handler          = "examples.lambda_handler.handler"
  filename         = var.package_zip
  source_code_hash = filebase64sha256(var.package_zip)
  timeout          = 60
  memory_size      = 1024

  environment {
    variables = {
      MEMORY_URL = module.memory.memory_urls[0]
    }
  }
}

output "memory_url" {
  value = module.memory.memory_urls[0]
}
