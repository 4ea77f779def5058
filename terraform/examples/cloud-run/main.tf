# An agent service on Cloud Run whose team memory lives in GCS: the APIs it needs, a service
# account limited to its prefixes by an IAM condition, the bucket module, the service running
# deploy/cloud-run/Dockerfile, and who may invoke it.

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 5.22"
    }
  }
}

variable "project" {
  description = "The Google Cloud project."
  type        = string
}

variable "region" {
  description = "Where the service and the bucket run."
  type        = string
  default     = "europe-west1"
}

variable "name" {
  description = "Name of the service and prefix of its service account, so deployments in one project do not collide."
  type        = string
  default     = "bucket-memory-agent"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,28}[a-z0-9]$", var.name))
    error_message = "name must be 2 to 30 lowercase letters, digits or -, starting with a letter (a service account ID's rules)."
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
  description = "The memory the service shares; its conversations' cursors go under <memory_prefix>-conversations."
  type        = string
  default     = "teams/blue"
}

variable "image" {
  description = "The service's image, built from deploy/cloud-run/Dockerfile and pushed to Artifact Registry."
  type        = string
}

variable "invokers" {
  description = "Who may call the service, such as [\"serviceAccount:frontend@acme.iam.gserviceaccount.com\"]."
  type        = list(string)
  default     = []
}

variable "model" {
  description = "The model the agent uses, such as openai:gpt-5-mini; empty runs the scripted offline model."
  type        = string
  default     = ""
}

variable "model_api_key_secret" {
  description = "Secret Manager secret ID holding the model's API key (its latest version is used); empty for none."
  type        = string
  default     = ""
}

variable "model_api_key_env" {
  description = "The environment variable the model's SDK reads its key from."
  type        = string
  default     = "OPENAI_API_KEY"
}

variable "max_instances" {
  description = "Instances the service may run at once: a cap on cost and on writers racing for the memory's log."
  type        = number
  default     = 10
}

resource "google_project_service" "needed" {
  for_each           = toset(["run.googleapis.com", "storage.googleapis.com", "iam.googleapis.com", "secretmanager.googleapis.com"])
  project            = var.project
  service            = each.value
  disable_on_destroy = false
}

resource "google_service_account" "agent" {
  project      = var.project
  account_id   = var.name
  display_name = "Agent with bucket-memory (${var.name})"
  depends_on   = [google_project_service.needed]
}

module "memory" {
  source        = "../../modules/gcs-memory-bucket"
  project       = var.project
  bucket_name   = var.bucket_name
  location      = var.region
  prefixes      = [var.memory_prefix, "${trimsuffix(var.memory_prefix, "/")}-conversations"]
  members       = ["serviceAccount:${google_service_account.agent.email}"]
  force_destroy = var.force_destroy
}

resource "google_secret_manager_secret_iam_member" "model_api_key" {
  count     = var.model_api_key_secret == "" ? 0 : 1
  project   = var.project
  secret_id = var.model_api_key_secret
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.agent.email}"
}

resource "google_cloud_run_v2_service" "agent" {
  name     = var.name
  project  = var.project
  location = var.region
  ingress  = "INGRESS_TRAFFIC_ALL"

  template {
    service_account = google_service_account.agent.email
    scaling {
      max_instance_count = var.max_instances
    }
    containers {
      image = var.image
      env {
        name  = "MEMORY_URL"
        value = module.memory.memory_urls[0]
      }
      env {
        name  = "CONVERSATIONS_URL"
        value = module.memory.memory_urls[1]
      }
      env {
        name  = "MODEL"
        value = var.model
      }
      dynamic "env" {
        for_each = var.model_api_key_secret == "" ? [] : [var.model_api_key_secret]
        content {
          name = var.model_api_key_env
          value_source {
            secret_key_ref {
              secret  = env.value
              version = "latest"
            }
          }
        }
      }
      startup_probe {
        http_get {
          path = "/healthz"
        }
      }
      liveness_probe {
        http_get {
          path = "/healthz"
        }
      }
    }
  }

  depends_on = [google_project_service.needed, google_secret_manager_secret_iam_member.model_api_key]
}

# Only these principals may call the service: requests carry their Google-signed identity token.
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = toset(var.invokers)
  project  = var.project
  location = var.region
  name     = google_cloud_run_v2_service.agent.name
  role     = "roles/run.invoker"
  member   = each.value
}

output "url" {
  description = "The service's URL; call it with an identity token of one of the invokers."
  value       = google_cloud_run_v2_service.agent.uri
}

output "memory_url" {
  description = "The memory the service shares."
  value       = module.memory.memory_urls[0]
}

output "service_account" {
  description = "The service's own identity, granted object access under its prefixes only."
  value       = google_service_account.agent.email
}
