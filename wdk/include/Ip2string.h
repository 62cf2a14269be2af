/* Ip2string.h: the spelling some sources use for <ip2string.h> (libndk WDK kit). */
#include <ip2string.h>
