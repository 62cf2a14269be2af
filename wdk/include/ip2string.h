/* ip2string.h (libndk WDK kit): see ndkwdk/ws2.h. */
#ifndef NDKWDK_IP2STRING_H
#define NDKWDK_IP2STRING_H
#include <ndkwdk/ws2.h>
#endif
