/*
 * An independent check of the benchmark's load generator: the same QoS 1 10×20 and QoS 0
 * scenarios written in plain C (blocking connect, one epoll loop, packets encoded once, PUBACKs
 * counted by length without parsing), so a figure from `deno task bench` can be set beside one
 * from a client that shares none of its code. Not part of the suite; see docs/BENCHMARKS.md.
 *
 *   gcc -O2 -o /tmp/mqtt_load tests/bench/crosscheck/mqtt_load.c
 *   taskset -c 1 /tmp/mqtt_load <port> <conns> <inflight> <qos 0|1> <seconds> [server pid]
 *
 * QoS 1: each connection keeps <inflight> PUBLISHes outstanding and sends one more per PUBACK;
 * the figure is PUBACKs per second after a one-second warm-up. QoS 0: each connection writes 64
 * PUBLISHes per write as fast as the socket takes them (blocking writes: the server sets the
 * pace); the figure is what the sockets took after the warm-up, when their buffers are already
 * full, so it is what the server read in that window. With a server pid it also
 * prints the server's and its own CPU over the measured window (clock ticks from /proc).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64
#define TOPIC "bench/t"
#define PAYLOAD_BYTES 100
#define QOS0_BURST 64

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* utime + stime of a process in clock ticks, or -1 when it cannot be read. */
static long cpu_ticks(const char *pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%s/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  long utime = 0, stime = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime) != 2)
    return -1;
  return utime + stime;
}

static int connect_mqtt(int port, int index) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char id[24];
  int idLen = snprintf(id, sizeof id, "crosscheck-%d", index);
  unsigned char c[64];
  int n = 0;
  c[n++] = 0x10;
  c[n++] = 10 + 2 + idLen;
  c[n++] = 0, c[n++] = 4, memcpy(c + n, "MQTT", 4), n += 4;
  c[n++] = 4, c[n++] = 0x02, c[n++] = 0, c[n++] = 60; /* 3.1.1, clean session, keep-alive 60 s */
  c[n++] = 0, c[n++] = idLen, memcpy(c + n, id, idLen), n += idLen;
  unsigned char ack[4];
  if (write(fd, c, n) != n || read(fd, ack, 4) != 4 || ack[0] != 0x20 || ack[3] != 0) return -1;
  return fd;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s <port> <conns> <inflight> <qos 0|1> <seconds> [server pid]\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]), conns = atoi(argv[2]), inflight = atoi(argv[3]), qos = atoi(argv[4]);
  double seconds = atof(argv[5]);
  const char *serverPid = argc > 6 ? argv[6] : NULL;
  if (conns < 1 || conns > MAX_CONNS || inflight < 1 || inflight > 1000 || (qos != 0 && qos != 1)) {
    fprintf(stderr, "mqtt_load: conns 1..%d, inflight 1..1000, qos 0 or 1\n", MAX_CONNS);
    return 2;
  }
  int fd[MAX_CONNS], ep = epoll_create1(0);
  for (int i = 0; i < conns; i++) {
    if ((fd[i] = connect_mqtt(port, i)) < 0) {
      fprintf(stderr, "mqtt_load: connection %d to 127.0.0.1:%d refused or not accepted\n", i, port);
      return 1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev);
  }
  /* One PUBLISH, encoded once; QoS 1 rewrites only its packet id. */
  unsigned char pkt[256];
  int topicLen = strlen(TOPIC), n = 0;
  pkt[n++] = 0x30 | (qos << 1);
  pkt[n++] = 2 + topicLen + (qos ? 2 : 0) + PAYLOAD_BYTES;
  pkt[n++] = 0, pkt[n++] = topicLen, memcpy(pkt + n, TOPIC, topicLen), n += topicLen;
  int idAt = n;
  if (qos) pkt[n++] = 0, pkt[n++] = 1;
  memset(pkt + n, 'a', PAYLOAD_BYTES), n += PAYLOAD_BYTES;
  int pktLen = n;

  static unsigned char out[1 << 20], in[1 << 16];
  unsigned short nextId[MAX_CONNS];
  int partial[MAX_CONNS];
  long count = 0, count0 = 0, s0 = -1, l0 = -1;
  double t0 = now(), measureFrom = t0 + 1.0, end = measureFrom + seconds;
  int warming = 1;
  if (qos == 0) {
    for (int j = 0; j < QOS0_BURST; j++) memcpy(out + j * pktLen, pkt, pktLen);
  } else {
    for (int i = 0; i < conns; i++) {
      nextId[i] = 1, partial[i] = 0;
      int len = 0;
      for (int j = 0; j < inflight; j++, len += pktLen) {
        pkt[idAt] = nextId[i] >> 8, pkt[idAt + 1] = nextId[i] & 0xff;
        nextId[i] = nextId[i] % 65535 + 1;
        memcpy(out + len, pkt, pktLen);
      }
      if (write(fd[i], out, len) != len) return 1;
    }
  }
  for (;;) {
    double t = now();
    if (warming && t >= measureFrom) {
      warming = 0, count0 = count, t0 = t, end = t + seconds;
      if (serverPid) s0 = cpu_ticks(serverPid), l0 = cpu_ticks("self");
    }
    if (!warming && t >= end) break;
    if (qos == 0) {
      for (int i = 0; i < conns; i++) {
        ssize_t w = write(fd[i], out, QOS0_BURST * pktLen); /* blocking: the server sets the pace */
        if (w > 0) count += w / pktLen;
      }
      continue;
    }
    struct epoll_event evs[MAX_CONNS];
    int ready = epoll_wait(ep, evs, MAX_CONNS, 100);
    for (int e = 0; e < ready; e++) {
      int i = evs[e].data.u32;
      ssize_t r = read(fd[i], in, sizeof in);
      if (r <= 0) {
        fprintf(stderr, "mqtt_load: the server closed connection %d\n", i);
        return 1;
      }
      int total = partial[i] + r, acks = total / 4; /* a PUBACK is 4 bytes: 40 02 id id */
      partial[i] = total % 4, count += acks;
      int len = 0;
      for (int j = 0; j < acks; j++, len += pktLen) {
        pkt[idAt] = nextId[i] >> 8, pkt[idAt + 1] = nextId[i] & 0xff;
        nextId[i] = nextId[i] % 65535 + 1;
        memcpy(out + len, pkt, pktLen);
      }
      if (len && write(fd[i], out, len) != len) fprintf(stderr, "mqtt_load: short write\n");
    }
  }
  double elapsed = now() - t0;
  printf("qos%d conns=%d inflight=%d msgs=%ld msg/s=%.0f", qos, conns, inflight, count - count0,
         (count - count0) / elapsed);
  if (serverPid && s0 >= 0) {
    double tick = sysconf(_SC_CLK_TCK) * elapsed / 100.0;
    printf(" server_cpu%%=%.1f load_cpu%%=%.1f", (cpu_ticks(serverPid) - s0) / tick,
           (cpu_ticks("self") - l0) / tick);
  }
  printf("\n");
  return 0;
}
