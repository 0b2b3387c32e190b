# shellcheck shell=bash
# Credentials of one local control plane: a CA, the apiserver's serving certificate, the
# service-account key pair, a static token file and the kubeconfigs that use it.
# Everything is made with openssl, once, and reused on later starts, so a kubeconfig
# handed out earlier stays valid. Source hack/lib/init.sh first.

# Users of the token file. The admin is in system:masters; the controller-manager and the
# scheduler get the user names that Kubernetes' bootstrap RBAC already binds to their
# roles; kwok stands in for every kubelet of the simulated nodes, which no single node
# identity covers, so it is a master too.
#   name -> "user,uid,groups"
nereid::pki::identity() {
  case "$1" in
    admin) echo 'nereid-admin,nereid-admin,"system:masters"' ;;
    kube-controller-manager) echo 'system:kube-controller-manager,system:kube-controller-manager,' ;;
    kube-scheduler) echo 'system:kube-scheduler,system:kube-scheduler,' ;;
    kwok) echo 'kwok-controller,kwok-controller,"system:masters"' ;;
    *) nereid::fatal "no identity for $1" ;;
  esac
}

# nereid::pki::ensure creates, when missing, everything under $NEREID_OUT_DIR/certs.
nereid::pki::ensure() {
  local dir="${NEREID_OUT_DIR}/certs"
  mkdir -p "${dir}"
  chmod 700 "${dir}"

  nereid::pki::ca "${dir}" ca nereid-local-ca
  # 10.96.0.1 is the first address of --service-cluster-ip-range: the in-cluster
  # "kubernetes" Service, which clients inside the cluster would dial.
  nereid::pki::cert "${dir}" ca apiserver kube-apiserver serverAuth \
    "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # The front proxy (request-header) CA: the apiserver publishes it, and the
  # controller-manager and scheduler, which delegate authentication to the apiserver,
  # log an error every few seconds while it is missing. It also lets aggregated API
  # servers (metrics-server, say) trust the apiserver later.
  nereid::pki::ca "${dir}" front-proxy-ca nereid-local-front-proxy-ca
  nereid::pki::cert "${dir}" front-proxy-ca front-proxy-client front-proxy-client clientAuth ""

  if [[ ! -s "${dir}/sa.key" || ! -s "${dir}/sa.pub" ]]; then
    nereid::log "generating the service-account signing key pair"
    if ! openssl genrsa -out "${dir}/sa.key" 2048 2>/dev/null ||
      ! openssl rsa -in "${dir}/sa.key" -pubout -out "${dir}/sa.pub" 2>/dev/null; then
      nereid::fatal "openssl could not create the service-account key pair in ${dir}"
    fi
  fi

  if [[ ! -s "${dir}/tokens.csv" ]]; then
    local who
    : >"${dir}/tokens.csv"
    for who in admin kube-controller-manager kube-scheduler kwok; do
      printf '%s,%s\n' "$(openssl rand -hex 24)" "$(nereid::pki::identity "${who}")" >>"${dir}/tokens.csv"
    done
  fi
  chmod 600 "${dir}"/*.key "${dir}/tokens.csv"
}

# nereid::pki::ca DIR NAME CN creates DIR/NAME.crt and DIR/NAME.key, a self-signed CA,
# unless both exist.
nereid::pki::ca() {
  local dir="$1" name="$2" cn="$3"
  [[ -s "${dir}/${name}.crt" && -s "${dir}/${name}.key" ]] && return 0
  nereid::log "generating ${name}"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -keyout "${dir}/${name}.key" -out "${dir}/${name}.crt" \
    -subj "/CN=${cn}" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null ||
    nereid::fatal "openssl could not create ${dir}/${name}.crt"
}

# nereid::pki::cert DIR CA NAME CN USAGE SANS creates DIR/NAME.crt and DIR/NAME.key
# signed by DIR/CA.crt, for extended key USAGE (serverAuth, clientAuth) with the
# subjectAltNames SANS (may be empty), unless both exist and CA signed the certificate.
nereid::pki::cert() {
  local dir="$1" ca="$2" name="$3" cn="$4" usage="$5" sans="$6"
  if [[ -s "${dir}/${name}.crt" && -s "${dir}/${name}.key" ]] &&
    openssl verify -CAfile "${dir}/${ca}.crt" "${dir}/${name}.crt" >/dev/null 2>&1; then
    return 0
  fi
  nereid::log "generating ${name} certificate"
  local ext=("basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=${usage}")
  [[ -z "${sans}" ]] || ext+=("subjectAltName=${sans}")
  if ! openssl req -newkey rsa:2048 -nodes -sha256 \
    -keyout "${dir}/${name}.key" -out "${dir}/${name}.csr" -subj "/CN=${cn}" 2>/dev/null ||
    ! openssl x509 -req -sha256 -days 3650 \
      -in "${dir}/${name}.csr" -CA "${dir}/${ca}.crt" -CAkey "${dir}/${ca}.key" -CAcreateserial \
      -out "${dir}/${name}.crt" -extfile <(printf '%s\n' "${ext[@]}") 2>/dev/null; then
    nereid::fatal "openssl could not create ${dir}/${name}.crt"
  fi
  rm -f "${dir}/${name}.csr"
}

# nereid::pki::token WHO prints the bearer token of WHO from the token file.
nereid::pki::token() {
  local user
  user="$(nereid::pki::identity "$1" | cut -d, -f1)"
  awk -F, -v u="${user}" '$2 == u { print $1; exit }' "${NEREID_OUT_DIR}/certs/tokens.csv"
}

# nereid::pki::kubeconfig WHO FILE writes a kubeconfig for WHO that trusts our CA and
# reaches the apiserver on loopback.
nereid::pki::kubeconfig() {
  local who="$1" file="$2" ca token
  ca="$(base64 -w0 <"${NEREID_OUT_DIR}/certs/ca.crt")"
  token="$(nereid::pki::token "${who}")"
  [[ -n "${token}" ]] || nereid::fatal "no token for ${who} in ${NEREID_OUT_DIR}/certs/tokens.csv"
  mkdir -p "$(dirname "${file}")"
  (
    umask 077
    cat >"${file}.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: nereid-local
  cluster:
    server: https://127.0.0.1:${NEREID_APISERVER_PORT}
    certificate-authority-data: ${ca}
users:
- name: ${who}
  user:
    token: ${token}
contexts:
- name: nereid-local
  context:
    cluster: nereid-local
    user: ${who}
current-context: nereid-local
EOF
  )
  mv -f "${file}.tmp" "${file}"
}
