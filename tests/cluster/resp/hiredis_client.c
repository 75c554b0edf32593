/* hiredis_client PORT [PASSWORD]: sends every line of stdin (arguments separated by single
 * spaces) to 127.0.0.1:PORT as one pipeline (all appended, then one write), then prints each
 * reply on a line of its own: an array as its elements separated by spaces, an integer, status or
 * string as is, an error as "error: <text>". With PASSWORD, AUTH goes first (its reply printed
 * too). Exit status 1 if the connection or a read fails. A test program of resp_tests (built only
 * when hiredis is found). */
#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kMaxCommands = 1000, kMaxArgs = 32, kMaxLine = 4096 };

static void print(const redisReply* r) {
  size_t i;
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      printf("%lld", r->integer);
      break;
    case REDIS_REPLY_ERROR:
      printf("error: %s", r->str);
      break;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_STRING:
      printf("%s", r->str);
      break;
    case REDIS_REPLY_NIL:
      printf("(nil)");
      break;
    case REDIS_REPLY_ARRAY:
      for (i = 0; i < r->elements; ++i) {
        if (i > 0) printf(" ");
        print(r->element[i]);
      }
      break;
    default:
      printf("(type %d)", r->type);
  }
}

int main(int argc, char** argv) {
  redisContext* c;
  char line[kMaxLine];
  int commands = 0;
  int i;
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: hiredis_client PORT [PASSWORD] < commands\n");
    return 2;
  }
  c = redisConnect("127.0.0.1", atoi(argv[1]));
  if (c == NULL || c->err) {
    fprintf(stderr, "hiredis_client: cannot connect: %s\n", c ? c->errstr : "no memory");
    return 1;
  }
  if (argc == 3) {
    redisAppendCommand(c, "AUTH %s", argv[2]);
    ++commands;
  }
  while (commands < kMaxCommands && fgets(line, sizeof line, stdin) != NULL) {
    const char* args[kMaxArgs];
    size_t lengths[kMaxArgs];
    int n = 0;
    char* save = NULL;
    char* word;
    line[strcspn(line, "\r\n")] = '\0';
    for (word = strtok_r(line, " ", &save); word != NULL && n < kMaxArgs;
         word = strtok_r(NULL, " ", &save)) {
      args[n] = word;
      lengths[n] = strlen(word);
      ++n;
    }
    if (n == 0) continue;
    redisAppendCommandArgv(c, n, args, lengths);
    ++commands;
  }
  for (i = 0; i < commands; ++i) {
    void* reply = NULL;
    if (redisGetReply(c, &reply) != REDIS_OK || reply == NULL) {
      fprintf(stderr, "hiredis_client: reply %d: %s\n", i + 1, c->errstr);
      redisFree(c);
      return 1;
    }
    print((const redisReply*)reply);
    printf("\n");
    freeReplyObject(reply);
  }
  redisFree(c);
  return 0;
}
