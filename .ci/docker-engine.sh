# Sourced by .ci/run: a Docker daemon for the container tests (tests/containers, marker `docker`), where one can run.
# Installs docker.io, docker-compose (v1) and debootstrap (the base-image shim's tool) with apt when they are
# missing, and starts dockerd when no daemon answers. It never fails the run: where no daemon can be had, the docker
# tests skip and say why. `ci_docker_stop` stops only the dockerd this script started, by its pid.

CI_DOCKERD_PID=""

ci_docker_start() {
  local started=$SECONDS log
  if docker info >/dev/null 2>&1; then
    echo "==> docker: a daemon is already running; using it (and leaving it running)"
    return 0
  fi
  if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker-compose >/dev/null 2>&1 \
     || ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "==> docker: installing docker.io docker-compose debootstrap"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io docker-compose debootstrap >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
             apt-get install -y -q docker.io docker-compose debootstrap >/dev/null 2>&1; } \
        || echo "==> docker: apt-get could not install them; the docker tests will skip"
    fi
  fi
  if ! command -v dockerd >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    echo "==> docker: no dockerd (or not root): the docker tests will skip"
    return 0
  fi
  log=$(mktemp /tmp/ci-dockerd.XXXXXX.log)
  dockerd >"$log" 2>&1 &
  CI_DOCKERD_PID=$!
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$CI_DOCKERD_PID" 2>/dev/null || break
    sleep 1
  done
  if docker info >/dev/null 2>&1; then
    echo "==> docker: started dockerd (pid $CI_DOCKERD_PID, log $log) in $((SECONDS - started)) s"
  else
    echo "==> docker: dockerd did not come up; the docker tests will skip. Its log:"
    tail -n 20 "$log" || true
    ci_docker_stop
  fi
}

ci_docker_stop() {
  [ -n "$CI_DOCKERD_PID" ] || return 0
  if kill -0 "$CI_DOCKERD_PID" 2>/dev/null; then
    kill -TERM "$CI_DOCKERD_PID" 2>/dev/null || true
    # dockerd stops its containers and the containerd it runs before it exits.
    for _ in $(seq 60); do kill -0 "$CI_DOCKERD_PID" 2>/dev/null || break; sleep 1; done
    if kill -0 "$CI_DOCKERD_PID" 2>/dev/null; then kill -KILL "$CI_DOCKERD_PID" 2>/dev/null || true; fi
    echo "==> docker: stopped the dockerd this run started (pid $CI_DOCKERD_PID)"
  fi
  CI_DOCKERD_PID=""
}
