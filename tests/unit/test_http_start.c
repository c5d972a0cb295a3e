/*
 * test_http_start.c - gh_http_start: it listens where it is told, and an
 * address it cannot bind is reported with the address and the system's
 * own reason, taken from the failed bind rather than guessed.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"

static const char conf_text[] =
	"{\"server\":{\"threads\":8,\"max_streams\":2},"
	"\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{\"a\":{\"provider\":\"m\"}}}";

/* A loopback socket that listens on a free port; its fd, port in *port. */
static int occupy(int *port)
{
	struct sockaddr_in a;
	socklen_t n = sizeof(a);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 1) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &n) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static void test_port_in_use_names_address_and_reason(void)
{
	struct gh_config *cfg = NULL;
	struct gh_app app;
	struct gh_http *h = NULL;
	struct gh_err e;
	char addr[64], want[160];
	int port = 0, fd;

	T_EQ_INT(gh_config_parse("t.json", conf_text, strlen(conf_text), &cfg, &e), GH_OK);
	memset(&app, 0, sizeof(app));
	app.boot_cfg = cfg;
	fd = occupy(&port);
	T_ASSERT(fd >= 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	T_EQ_INT(gh_http_start(&app, addr, &h, &e), GH_E_IO);
	T_ASSERT(h == NULL);
	snprintf(want, sizeof(want), "cannot listen on %s: %s", addr, strerror(EADDRINUSE));
	T_EQ_STR(e.msg, want);
	close(fd);
	/* the same address once free: listening, on that port */
	T_EQ_INT(gh_http_start(&app, addr, &h, &e), GH_OK);
	T_EQ_INT(gh_http_port(h), port);
	gh_http_stop(h);
	gh_config_free(cfg);
}

static void test_port_zero_picks_one(void)
{
	struct gh_config *cfg = NULL;
	struct gh_app app;
	struct gh_http *h = NULL;
	struct gh_err e;

	T_EQ_INT(gh_config_parse("t.json", conf_text, strlen(conf_text), &cfg, &e), GH_OK);
	memset(&app, 0, sizeof(app));
	app.boot_cfg = cfg;
	T_EQ_INT(gh_http_start(&app, "127.0.0.1:0", &h, &e), GH_OK);
	T_ASSERT(gh_http_port(h) > 0);
	gh_http_stop(h);
	gh_config_free(cfg);
}

T_MAIN(T(test_port_in_use_names_address_and_reason), T(test_port_zero_picks_one))
