/* NetIoApi.h: the spelling some sources use for <netioapi.h> (libndk WDK kit). */
#include <netioapi.h>
