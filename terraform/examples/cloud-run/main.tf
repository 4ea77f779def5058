# An agent on Cloud Run whose team memory lives in GCS: the bucket module with a prefix-scoped
# binding for the service's own service account, and the service with MEMORY_URL set.

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 5.0"
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

variable "bucket_name" {
  description = "A globally unique bucket name."
  type        = string
}

variable "image" {
  description = "A container image serving the agent (this project and examples/, listening on $PORT)."
  type        = string
}

resource "google_service_account" "agent" {
  project      = var.project
  account_id   = "bucket-memory-agent"
  display_name = "Agent with bucket-memory"
}

module "memory" {
  source      = "../../modules/gcs-memory-bucket"
  bucket_name = var.bucket_name
  location    = var.region
  prefix      = "teams/blue"
  member      = "serviceAccount:${google_service_account.agent.email}"
}

resource "google_cloud_run_v2_service" "agent" {
  name     = "bucket-memory-agent"
  project  = var.project
  location = var.region
  ingress  = "INGRESS_TRAFFIC_INTERNAL_ONLY"

  template {
    service_account = google_service_account.agent.email
    containers {
      image = var.image
      env {
        name  = "MEMORY_URL"
        value = module.memory.memory_url
      }
    }
  }
}

output "memory_url" {
  value = module.memory.memory_url
}
