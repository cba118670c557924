import { BadRequestException, Injectable, PipeTransform } from '@nestjs/common';

/** Parses an `:id` path parameter: a positive integer that fits a database integer. */
@Injectable()
export class ParseIdPipe implements PipeTransform<string, number> {
  transform(value: string): number {
    if (!/^[1-9]\d{0,9}$/.test(value) || Number(value) > 2_147_483_647) {
      throw new BadRequestException([`id must be a positive integer, got '${value.slice(0, 40)}'`]);
    }
    return Number(value);
  }
}
