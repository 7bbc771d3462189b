"""What ``runnercheck demo`` runs on: a tiny tensor-parallel engine the package ships."""
