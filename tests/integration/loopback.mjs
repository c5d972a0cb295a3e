// Preloaded (node --import) into servers the tests run unchanged, such as
// the MCP reference server in its Streamable HTTP mode: every TCP listen
// binds 127.0.0.1, whatever host the server asked for (Express's
// app.listen(PORT) would take every interface). Once bound it reports the
// port on stderr, for a test that asked for port 0 (a server's own line may
// name the port it was given, and some print it on failure too).
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function loopbackListen(...args) {
  if (args[0] !== null && typeof args[0] === 'object' && !('fd' in args[0]) && !('path' in args[0])) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  } else if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    if (typeof args[1] === 'string') args[1] = '127.0.0.1';
    else args.splice(1, 0, '127.0.0.1');
  }
  this.once('listening', () => {
    const a = this.address();
    if (a && typeof a === 'object') process.stderr.write(`loopback: listening on ${a.address}:${a.port}\n`);
  });
  return listen.apply(this, args);
};
