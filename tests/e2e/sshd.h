// A real sshd for e2e tests that run in a private network namespace: port 2222 on every address,
// host and user keys made in $DIR, root login by key only. Leaves $S (its pid) and $SSH_OPTS (the
// client options that reach it) in the script; the script ends it with `kill $S`.
#pragma once

namespace dsd::e2e {

inline constexpr const char* kSshd =
    "mkdir -p /run/sshd; "
    "ssh-keygen -q -t ed25519 -N '' -f $DIR/host_key; ssh-keygen -q -t ed25519 -N '' -f $DIR/user_key; "
    "cp $DIR/user_key.pub $DIR/authorized_keys; chmod 600 $DIR/authorized_keys; "
    "printf 'Port 2222\\nListenAddress 0.0.0.0\\nHostKey %s/host_key\\nAuthorizedKeysFile %s/authorized_keys\\n"
    "PermitRootLogin prohibit-password\\nPasswordAuthentication no\\nKbdInteractiveAuthentication no\\nUsePAM no\\n"
    "StrictModes no\\nPidFile %s/sshd.pid\\n' $DIR $DIR $DIR > $DIR/sshd_config; "
    "/usr/sbin/sshd -D -e -f $DIR/sshd_config 2> $DIR/sshd.log & S=$!; "
    "for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/2222) 2>/dev/null && break; sleep 0.1; done; "
    "SSH_OPTS=\"-F /dev/null -p 2222 -i $DIR/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
    "-o LogLevel=ERROR\"; ";

}  // namespace dsd::e2e
