# tabby image: tabby-node (agent, BGP, felix, IPAM service), tabby-typha (the fan-out tier),
# tabbyctl, and the CNI plugins that
# tabby-node's install-cni step copies onto the host.
#
#   docker build -t ghcr.io/tabbynet/tabby:$(git describe --tags) --build-arg VERSION=$(git describe --tags) .

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first: a source change does not re-download them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# make build: static (CGO_ENABLED=0) binaries in bin/, version stamped into internal/version.
RUN make build VERSION=${VERSION}

# Not distroless/scratch: felix shells out to iptables-restore/iptables-save and ipset at
# runtime, so the final image must carry those binaries (and their libraries). debian-slim with
# the two packages is the smallest base that has them.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables ipset \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/bin/tabby-node /src/bin/tabby-typha /src/bin/tabbyctl /usr/local/bin/
# The plugins install-cni copies to the host's /opt/cni/bin (--src-bin-dir).
COPY --from=build /src/bin/tabby /src/bin/tabby-ipam /opt/tabby/cni-bin/
ENTRYPOINT ["/usr/local/bin/tabby-node"]
