# A function from a folder, an http and a cron trigger, and a job: applied by
# crates/terraform-provider-sless/tests/terraform.rs (docs/terraform.md explains each part).

terraform {
  required_providers {
    sless = {
      source = "kube5s/sless"
    }
  }
}

# endpoint, token and namespace come from SLESS_URL, SLESS_TOKEN and SLESS_NAMESPACE.
provider "sless" {}

variable "greeting" {
  type    = string
  default = "Hello"
}

variable "memory_mb" {
  type    = number
  default = 128
}

variable "run_id" {
  type    = number
  default = 1
}

resource "sless_function" "hello" {
  name       = "tf-hello"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/function"
  memory_mb  = var.memory_mb
  env = {
    GREETING = var.greeting
  }
}

# No depends_on: the trigger and the job name the function, which may still be building.
resource "sless_trigger" "public" {
  name     = "tf-hello-http"
  function = sless_function.hello.name
  type     = "http"
}

resource "sless_trigger" "nightly" {
  name     = "tf-hello-nightly"
  function = "tf-hello"
  type     = "cron"
  schedule = "0 1 * * *"
  timezone = "Europe/Berlin"
  payload  = jsonencode({ report = "daily" })
}

resource "sless_function_job" "warmup" {
  name     = "tf-hello-warmup"
  function = "tf-hello"
  run_id   = var.run_id
  payload  = jsonencode({ reason = "deploy" })
}

output "url" {
  value = sless_trigger.public.url
}

output "version" {
  value = sless_function.hello.version
}
